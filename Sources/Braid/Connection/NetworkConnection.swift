import BraidIO
import Foundation
import Synchronization

/// A connection to an endpoint over a declared protocol stack, with Network.framework's names.
/// A QUIC connection (`NetworkConnection<QUIC>`) carries streams and datagrams; a TLS or TCP
/// connection (`NetworkConnection<TLS>`, `NetworkConnection<TCP>`) is one byte stream each way,
/// sent and received on the connection itself.
///
/// The connection starts on first use (or `start()`), and follows `states`. A UDP connection
/// (`NetworkConnection<UDP>`) sends and receives whole datagrams on the connection itself. Every call is
/// async, waits for the handshake where it must, and throws `NetworkError`.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 4433)) {
///     QUIC(alpn: ["echo"]).trust(.certificateAuthorities(file: "ca.pem"))
/// }
/// let stream = try await connection.openStream()
/// try await stream.send(Data("hello".utf8), endOfStream: true)
/// let (reply, _) = try await stream.receive(atLeast: 1, atMost: 1024)
/// connection.cancel()
/// ```
public final class NetworkConnection<ApplicationProtocol: NetworkProtocol>: Sendable {
    /// The connection's states: `NetworkConnectionState`.
    public typealias State = NetworkConnectionState

    /// Where the connection goes (for a listener's connection: where it came from).
    public let endpoint: NWEndpoint
    /// The protocol stack the connection runs, as its top protocol (for QUIC, its options).
    public let stack: ApplicationProtocol
    /// The parameters (a listener's connection: the stack's defaults).
    let parameters: NetworkParameters<ApplicationProtocol>
    /// Where the parameters ask to send from (nil: the system chooses).
    private var requestedLocalEndpoint: NWEndpoint? { parameters.localEndpoint }
    let loop: EventLoop
    /// Where the connection's sockets come from (UDP for QUIC, TCP for TLS and TCP).
    let sockets: any DatagramSocketFactory
    let streamSockets: any ByteStreamSocketFactory
    let shared: ConnectionShared
    let core: LoopBound<ConnectionCore>
    /// A `TLV` or `Coder` connection's messages over its byte stream (nil for other stacks,
    /// and for `Coder` over UDP): made once, not per send or receive.
    let framedEnd: MessageEnd?
    private let started: Atomic<Bool>

    /// A connection to `endpoint` over the stack the builder returns.
    public convenience init(to endpoint: NWEndpoint, @ProtocolStackBuilder using stack: () -> ApplicationProtocol) {
        self.init(to: endpoint, using: NetworkParameters(stack: stack()))
    }

    /// A connection to `endpoint` with these parameters. Nothing is sent until `start()` or the
    /// first call that needs the connection. QUIC, TLS, TCP and UDP (and the framers over them)
    /// are implemented: other stacks fail on start with `NetworkError.unsupported`.
    public init(to endpoint: NWEndpoint, using parameters: NetworkParameters<ApplicationProtocol>) {
        self.endpoint = endpoint
        stack = parameters.stack
        self.parameters = parameters
        let environment = NetworkEnvironment.current
        loop = environment?.loop ?? LoopPool.loop()
        sockets = environment?.sockets ?? UDPSockets()
        streamSockets = environment?.streamSockets ?? TCPSockets()
        let core = ConnectionCore.make(for: stack, loop: loop, endpointDescription: endpoint.description)
        shared = core.shared
        self.core = LoopBound(handingOver: core, to: loop)
        framedEnd = Self.framedEnd(shared: shared, core: self.core)
        started = Atomic(false)
    }

    /// A listener's inbound connection, already running on `core`'s loop.
    init(inbound endpoint: NWEndpoint, stack: ApplicationProtocol, core: LoopBound<ConnectionCore>, shared: ConnectionShared) {
        self.endpoint = endpoint
        self.stack = stack
        self.core = core
        self.shared = shared
        loop = core.loop
        sockets = UDPSockets()
        streamSockets = TCPSockets()
        parameters = NetworkParameters(stack: stack)
        framedEnd = Self.framedEnd(shared: shared, core: core)
        started = Atomic(true)
    }

    deinit {
        // Nobody can use the connection any more: close it so its socket and memory go.
        let core = core
        loop.execute { context in core.value.cancel(context: context) }
    }

    // MARK: State

    /// The state now.
    public var state: State { shared.states.current }

    /// The current state, then every change, ending after `failed` or `cancelled`.
    ///
    /// ```swift
    /// for await state in connection.states {
    ///     if case .waiting(let error) = state { print("waiting: \(error)") }
    /// }
    /// ```
    public var states: AsyncStream<State> { shared.states.stream() }

    /// Calls `handler` on every state change (from a Braid thread; keep it short). Returns the
    /// connection, so the calls chain.
    ///
    /// ```swift
    /// let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 443)) { TLS() }
    ///     .onStateUpdate { _, state in print("state: \(state)") }
    ///     .onViabilityUpdate { _, isViable in print("viable: \(isViable)") }
    /// ```
    @discardableResult
    public func onStateUpdate(_ handler: @escaping @Sendable (NetworkConnection, State) -> Void) -> NetworkConnection {
        shared.states.setHandler { [weak self] state in
            guard let self else { return }
            handler(self, state)
        }
        return self
    }

    /// Starts connecting (optional: the first send, receive or `openStream` starts it too).
    public func start() {
        // Read first: every send and receive calls this, and a load shares the cache line
        // where an exchange would take it.
        guard !started.load(ordering: .relaxed), !started.exchange(true, ordering: .relaxed) else { return }
        shared.states.update(.preparing)
        let start = ClientStart(
            core: core, endpoint: endpoint, local: requestedLocalEndpoint, serviceClass: parameters.serviceClass,
            multipath: parameters.multipathServiceType, fastOpenAllowed: parameters.fastOpenAllowed,
            constraints: parameters.interfaceConstraints, sockets: sockets,
            streamSockets: streamSockets)
        do {
            try StackBindings.binding(of: stack).startClient(start)
        } catch {
            fail(NetworkError(error))
        }
    }

    private func fail(_ error: NetworkError) {
        loop.execute { [core] _ in core.value.fail(error) }
    }

    /// Like `cancel()`, and returns once the close has been handed to the socket (at once if
    /// the connection had already ended). `cancel()` returns before that, so a process that
    /// exits right after it may leave the peer waiting for its idle timeout; await this instead.
    ///
    /// ```swift
    /// await connection.close()
    /// exit(0)
    /// ```
    public func close() async {
        shared.states.update(.cancelled)
        let core = core
        _ = try? await loop.submit { context in core.value.cancel(context: context) }
    }

    /// Closes the connection (QUIC: application error code 0; TLS and TCP: the bytes of sends
    /// that already returned, then close_notify and FIN, within 10 s) and ends every pending
    /// call with `NetworkError.cancelled`. The state becomes `cancelled`. The close goes out from the
    /// connection's event loop shortly after this returns (`close()` waits for it).
    public func cancel() {
        shared.states.update(.cancelled)
        loop.execute { [core] context in core.value.cancel(context: context) }
    }
}

/// Runs `handler` with a connection and cancels the connection when the handler returns or
/// throws (or its task is cancelled).
///
/// ```swift
/// let reply = try await withNetworkConnection(to: .hostPort(host: "::1", port: 4433)) {
///     QUIC(alpn: ["echo"])
/// } _: { connection in
///     let stream = try await connection.openStream()
///     try await stream.send(Data("ping".utf8), endOfStream: true)
///     return try await stream.receive(atLeast: 4, atMost: 4).content
/// }
/// ```
public func withNetworkConnection<ApplicationProtocol: NetworkProtocol, Result: Sendable>(
    to endpoint: NWEndpoint, @ProtocolStackBuilder using stack: () -> ApplicationProtocol,
    _ handler: (NetworkConnection<ApplicationProtocol>) async throws -> Result
) async throws -> Result {
    let connection = NetworkConnection(to: endpoint, using: NetworkParameters(stack: stack()))
    do {
        let result = try await handler(connection)
        await connection.close()
        return result
    } catch {
        await connection.close()
        throw error
    }
}

extension NetworkConnection {
    /// Retries at once if the connection is waiting for a usable path (it also retries by
    /// itself at the next interface change).
    func retryNow() {
        loop.execute { [core] context in core.value.establishment?.retryNow(context) }
    }

    /// Closes at once, without the graceful end (TLS and TCP: a reset, SO_LINGER 0; UDP and
    /// QUIC: as `cancel()`), and ends every pending call with `NetworkError.cancelled`
    /// (`NWConnection.forceCancel()`).
    func forceCancel() {
        shared.states.update(.cancelled)
        loop.execute { [core] context in core.value.forceCancel(context: context) }
    }
}
