import BraidIO
import BraidQUIC
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Runs one client connection on an event loop over its own UDP socket.
///
/// Create it on the loop; the application works with `connection` from loop code (closures
/// given to `EventLoop.execute`) and calls `service(_:)` after acting on it.
///
/// ```swift
/// let driver = try QUICClientDriver(
///     context: context, client: clientContext, remote: QUICAddress(ip: "127.0.0.1", port: 4433)!,
///     serverName: "localhost") { connection, event in print(event) }
/// ```
package final class QUICClientDriver: LoopHandler {
    package let connection: QUICConnection
    /// The socket in use now (`migrate` replaces it).
    package private(set) var socket: any DatagramSocket
    /// Where new sockets come from (`migrate` makes one; to another interface, it binds the
    /// factory there).
    private var sockets: any DatagramSocketFactory
    package var onEvent: QUICEventHandler
    private let batching: BatchingOptions
    private let receiveSlots: Int
    /// Counts of the sockets `migrate` retired.
    private var retiredCounters = SocketCounters()
    private var token: UInt64 = 0
    private var writeBlocked = false
    private var isServicing = false

    /// `local` picks the address and port to send from; by default the address the kernel
    /// routes from toward `remote`, with a system-chosen port.
    package convenience init(
        context: LoopContext, client: QUICClientContext, remote: QUICAddress, serverName: String,
        resumption: QUICResumptionTicket? = nil, local: QUICAddress? = nil, batching: BatchingOptions = .all,
        receiveSlots: Int = 8, onEvent: @escaping QUICEventHandler
    ) throws {
        try self.init(
            context: context, client: client, remote: remote, serverName: serverName, resumption: resumption, local: local,
            batching: batching, receiveSlots: receiveSlots, sockets: UDPSockets(), onEvent: onEvent)
    }

    /// As above, with sockets from `sockets` (an in-memory network, in tests).
    package init(
        context: LoopContext, client: QUICClientContext, remote: QUICAddress, serverName: String,
        resumption: QUICResumptionTicket? = nil, local: QUICAddress? = nil, batching: BatchingOptions = .all,
        receiveSlots: Int = 8, sockets: any DatagramSocketFactory, onEvent: @escaping QUICEventHandler
    ) throws {
        self.sockets = sockets
        socket = try sockets.bind(
            try local ?? sockets.localAddress(toward: remote), batching: batching, receiveSlots: receiveSlots, sendBatches: 8,
            reusePort: false)
        connection = try client.connect(
            path: QUICPath(local: socket.localAddress, remote: remote), serverName: serverName, resumption: resumption,
            now: context.now)
        self.onEvent = onEvent
        self.batching = batching
        self.receiveSlots = receiveSlots
        token = try socket.register(self, in: context)
        service(context)
    }

    /// Every syscall, datagram and byte of this connection, across migrations.
    package var counters: SocketCounters { retiredCounters + socket.counters }

    /// Moves the connection to a new socket on a new local port (as after a NAT rebinding or
    /// a network change) and tells the server (RFC 9000 §9). Needs a confirmed handshake. Call
    /// it from loop code, not from inside `onEvent` (the running pass still holds the old socket).
    package func migrate(_ context: LoopContext) throws {
        try migrate(context, toDevice: nil)
    }

    /// As `migrate(_:)`, onto the interface `device` when given: the new socket is bound to it
    /// (SO_BINDTODEVICE, as every later socket of the connection) and sends from the address
    /// the kernel picks there toward the peer. For when the connection's own address or
    /// interface went away.
    package func migrate(_ context: LoopContext, toDevice device: String?) throws {
        guard !isServicing else { throw QUICError.invalidState("migrate from loop code, not from inside onEvent") }
        let factory = try device.map { try sockets.boundToDevice($0) } ?? sockets
        let local = try device.map { _ in try factory.localAddress(toward: connection.path.remote) } ?? socket.localAddress.withPort(0)
        let fresh = try factory.bind(local, batching: batching, receiveSlots: receiveSlots, sendBatches: 8, reusePort: false)
        do {
            try connection.migrate(to: QUICPath(local: fresh.localAddress, remote: connection.path.remote), now: context.now)
        } catch {
            fresh.close()
            throw error
        }
        let freshToken = try fresh.register(self, in: context)
        context.deregister(token)
        _ = socket.flush()
        retiredCounters = retiredCounters + socket.counters
        socket.close()
        socket = fresh
        sockets = factory
        token = freshToken
        writeBlocked = false
        service(context)
    }

    /// Sends what the connection has to send and re-arms its timer. Call after acting on
    /// `connection` from loop code. From inside `onEvent` it does nothing: the pass that
    /// delivered the event writes right after the handler returns.
    package func service(_ context: LoopContext) {
        guard !isServicing else { return }
        isServicing = true
        defer { isServicing = false }
        let now = context.now
        if !writeBlocked {
            let flushed = DriverPass.service(connection, socket: socket, now: now, onEvent: onEvent)
            if !flushed {
                writeBlocked = true
                context.setWantsWritable(token, true)
            }
        } else {
            while let event = connection.pollEvent() { onEvent(connection, event) }
        }
        if connection.isTerminated {
            close(context)
            return
        }
        context.setTimer(token, at: connection.nextDeadline)
    }

    package func readable(_ context: LoopContext) {
        // A bounded number of receive calls per wake-up keeps timers and other sockets fair.
        for _ in 0..<8 {
            // Stamped after the previous batch's writes: ngtcp2 takes an acknowledgement
            // stamped earlier than its packet was sent as a huge RTT sample.
            let now = context.now
            let got = socket.receive { datagram, metadata in
                connection.receive(datagram: datagram, path: QUICPath(metadata), ecn: metadata.ecn, now: now)
            }
            if !got { break }
            // Acknowledge (and hand over) each batch as it is processed, so the sender's
            // window keeps moving instead of waiting for the whole pass.
            service(context)
            // The connection may have ended in that pass, closing the socket: never read a
            // closed descriptor (its number may already belong to someone else).
            if connection.isTerminated { return }
        }
        service(context)
    }

    package func writable(_ context: LoopContext) {
        guard socket.flush() else { return }
        writeBlocked = false
        context.setWantsWritable(token, false)
        service(context)
    }

    package func timerFired(_ context: LoopContext) {
        connection.handleTimeout(now: context.now)
        service(context)
    }

    package func close(_ context: LoopContext) {
        context.deregister(token)
        socket.close()
    }
}

/// A client connection's channel reaches the datapath through its driver.
extension QUICClientDriver: QUICChannelTransport {
    package var socketCounters: SocketCounters? { counters }

    /// Closes the socket and drops the event handler (which holds the channel).
    package func release(_ context: LoopContext) {
        close(context)
        onEvent = { _, _ in }
    }

    package func moveToNewPath(_ context: LoopContext, device: String?) throws -> SocketAddress {
        try migrate(context, toDevice: device)
        return connection.path.local
    }
}
