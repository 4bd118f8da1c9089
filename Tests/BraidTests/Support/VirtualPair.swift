import BraidIO
import BraidQUIC
import BraidQUICIO
import Foundation
import Synchronization

@testable import Braid

/// A client and a server `NetworkConnection<QUIC>` joined by an in-memory wire on a virtual
/// event loop. Everything above the socket runs as it does for real (the connection owners,
/// their streams and datagram queues, the public facades and the async calls that wait on the
/// loop), but no socket or loop thread is involved, and timers fire when the test moves the
/// virtual clock, so seconds of protocol time take milliseconds.
final class VirtualPair: Sendable {
    let loop: EventLoop
    /// One-way delay of the wire.
    let delay: Duration
    let client: NetworkConnection<QUIC>
    private let serverConnection = SharedSlot<NetworkConnection<QUIC>>()

    /// The server's connection, once the client's first packet has arrived.
    var server: NetworkConnection<QUIC>? { serverConnection.value }

    init(delay: Duration = .milliseconds(10), configure: (inout QUICTransportConfiguration) -> Void = { _ in }) throws {
        loop = try EventLoop(virtualTimeStartingAt: QUICInstant(nanoseconds: 1_000_000_000))
        self.delay = delay
        var configured = QUICTransportConfiguration()
        configure(&configured)
        let transport = configured
        let clientContext = try Fixtures.client { $0.transport = transport }
        let endpoint = try Fixtures.server { $0.transport = transport }
        let built = SharedSlot<NetworkConnection<QUIC>>()
        let serverConnection = serverConnection
        let stack = QUIC(alpn: ["echo"])
        // Made on the loop: the owners and their facades belong to it.
        let setup = LoopBound(handingOver: (clientContext, endpoint), to: loop)
        loop.execute { [delay] context in
            let (clientContext, endpoint) = setup.value
            let server = VirtualServer(endpoint: endpoint, delay: delay, stack: stack, transport: transport) { connection in
                serverConnection.value = connection
            }
            do {
                let path = QUICPath(local: server.clientAddress, remote: server.address)
                let engine = try clientContext.connect(path: path, serverName: "localhost", now: context.now)
                let end = VirtualEnd(engine: engine, delay: delay) { bytes, context in server.receive(bytes, context) }
                server.client = end
                let connection = NetworkConnection<QUIC>.running(
                    peer: .hostPort(host: "127.0.0.1", port: 4433), stack: stack, configuration: transport, context: context
                ) { $0.attach(engine, transport: end, context: context) }
                end.start(connection.core.value.quic, context)
                built.value = connection
            } catch {
                preconditionFailure("virtual client: \(error)")
            }
        }
        loop.runPending()
        client = built.value!
    }

    /// Runs `body` while moving the pair's virtual clock (`EventLoop.drive`).
    func run<T: Sendable>(
        limit: Duration = .seconds(20), step: Duration = .milliseconds(1), _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await loop.drive(limit: limit, step: step, body)
    }

    /// Moves the virtual clock by `duration` with nothing waiting on it.
    func advance(by duration: Duration) {
        loop.advance(by: duration)
    }

}

/// One end of the wire: an engine, the channel that owns it, and a timer, on the virtual loop.
/// The channel's transport: writing sends each datagram to the other end after the delay.
private final class VirtualEnd: QUICChannelTransport, LoopHandler {
    let engine: QUICConnection
    private let delay: Duration
    private let send: ([UInt8], LoopContext) -> Void
    private var channel: QUICChannel?
    private var timer: UInt64?
    private var isServicing = false
    private var needsService = false

    init(engine: QUICConnection, delay: Duration, send: @escaping ([UInt8], LoopContext) -> Void) {
        self.engine = engine
        self.delay = delay
        self.send = send
    }

    /// Starts serving `channel`, which has taken over this end's engine.
    func start(_ channel: QUICChannel, _ context: LoopContext) {
        self.channel = channel
        timer = context.registerTimer(self)
        service(context)
    }

    func receive(_ bytes: [UInt8], path: QUICPath, _ context: LoopContext) {
        engine.receive(datagram: bytes, path: path, now: context.now)
        service(context)
    }

    /// Delivers events, sends what the engine writes, re-arms the timer; a call from inside an
    /// event handler asks for one more round instead of re-entering.
    func service(_ context: LoopContext) {
        guard !isServicing else {
            needsService = true
            return
        }
        isServicing = true
        defer { isServicing = false }
        repeat {
            needsService = false
            while let event = engine.pollEvent() { channel?.handle(event, context: context) }
            for transmit in engine.pollTransmits(now: context.now) {
                for datagram in transmit.datagrams {
                    let bytes = Array(datagram)
                    context.schedule(at: context.now + delay) { [send] context in send(bytes, context) }
                }
            }
            while let event = engine.pollEvent() { channel?.handle(event, context: context) }
        } while needsService
        if let timer { context.setTimer(timer, at: engine.nextDeadline) }
    }

    func release(_ context: LoopContext) {
        if let timer { context.deregister(timer) }
        timer = nil
    }

    var socketCounters: SocketCounters? { nil }

    func moveToNewPath(_ context: LoopContext, device: String?) throws -> SocketAddress {
        throw QUICError.invalidState("virtual connections do not migrate")
    }

    func readable(_ context: LoopContext) {}
    func writable(_ context: LoopContext) {}
    func close(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) {
        engine.handleTimeout(now: context.now)
        service(context)
    }
}

/// The server side of the wire: an endpoint that routes the client's datagrams and makes the
/// public connection (with its own channel) for the first one it accepts.
private final class VirtualServer {
    let address = QUICAddress(ip: "127.0.0.1", port: 4433)!
    let clientAddress = QUICAddress(ip: "127.0.0.2", port: 50000)!
    /// The client's end (its channel keeps it).
    weak var client: VirtualEnd?
    private let endpoint: QUICServerEndpoint
    private let delay: Duration
    private let stack: QUIC
    private let transport: QUICTransportConfiguration
    private let accepted: (NetworkConnection<QUIC>) -> Void
    private var end: VirtualEnd?

    init(
        endpoint: QUICServerEndpoint, delay: Duration, stack: QUIC, transport: QUICTransportConfiguration,
        accepted: @escaping (NetworkConnection<QUIC>) -> Void
    ) {
        self.endpoint = endpoint
        self.delay = delay
        self.stack = stack
        self.transport = transport
        self.accepted = accepted
    }

    func receive(_ bytes: [UInt8], _ context: LoopContext) {
        let path = QUICPath(local: address, remote: clientAddress)
        guard let connection = endpoint.receive(datagram: bytes, path: path, now: context.now) else { return }
        if let end {
            end.service(context)
        } else {
            let clientPath = QUICPath(local: clientAddress, remote: address)
            let end = VirtualEnd(engine: connection, delay: delay) { [weak self] bytes, context in
                self?.client?.receive(bytes, path: clientPath, context)
            }
            self.end = end
            let server = NetworkConnection<QUIC>.running(
                peer: .hostPort(host: "127.0.0.2", port: 50000), stack: stack, configuration: transport, context: context
            ) { $0.attach(connection, transport: end, context: context) }
            end.start(server.core.value.quic, context)
            accepted(server)
        }
        endpoint.applyRoutingChanges(of: connection)
    }
}
