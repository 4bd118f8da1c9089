import BraidCore
import Logging

/// A TCP listener spread over event loops: one listening socket per loop on the shared port
/// (SO_REUSEPORT, so the kernel spreads new connections over them by their addresses), each
/// accepting on its own loop. Every connection lives on the loop that accepted it.
package final class TCPServerGroup: Sendable {
    /// The address all listening sockets share (with the port the kernel chose, if 0 was asked for).
    package let localAddress: SocketAddress
    private let acceptors: [LoopBound<TCPAcceptor>]

    private init(localAddress: SocketAddress, acceptors: [LoopBound<TCPAcceptor>]) {
        self.localAddress = localAddress
        self.acceptors = acceptors
    }

    /// Binds one listening socket per loop and starts accepting.
    /// - Parameters:
    ///   - unixPath: listen on a Unix-domain socket there instead of `address`: one socket,
    ///     on the first loop (Unix-domain sockets cannot share a path).
    ///   - makeHandler: called on each loop; returns what takes that loop's accepted
    ///     sockets (on the loop).
    package static func start(
        loops: [EventLoop], bindTo address: SocketAddress, unixPath: UnixSocketPath? = nil, options: TCPOptions, backlog: Int = 1024,
        sockets: any ByteStreamSocketFactory,
        makeHandler: @escaping @Sendable (LoopContext) -> (any ByteStreamSocket, LoopContext) -> Void
    ) async throws -> TCPServerGroup {
        precondition(!loops.isEmpty, "a server group needs a loop")
        // A Unix-domain path cannot be shared: it gets one socket, on the first loop.
        let (acceptors, bound) = try await PerLoopBinding.bind(loops: unixPath == nil ? loops : [loops[0]], to: address) {
            _, target, context throws -> (TCPAcceptor, SocketAddress) in
            // One loop needs no port sharing; leaving SO_REUSEPORT off then makes a second
            // server on the same port fail with EADDRINUSE instead of joining it.
            let listener =
                try unixPath.map { try sockets.listen(onUnixPath: $0, backlog: backlog) }
                ?? sockets.listen(on: target, options: options, reusePort: loops.count > 1, backlog: backlog)
            let acceptor = TCPAcceptor(listener: listener, accepted: makeHandler(context))
            do {
                _ = try listener.register(acceptor, in: context)
            } catch {
                listener.close()
                throw error
            }
            return (acceptor, listener.localAddress)
        } closingOnFailure: { await close($0) }
        return TCPServerGroup(localAddress: bound, acceptors: acceptors)
    }

    /// `close()` without waiting: each loop closes its listening socket at its next pass, so
    /// clients connecting after that are refused by the kernel (RST).
    package func stopAccepting() {
        for acceptor in acceptors {
            acceptor.loop.execute { _ in acceptor.value.listener.close() }
        }
    }

    /// Stops accepting: closes every listening socket (connections already accepted carry on).
    package func close() async {
        await Self.close(acceptors)
    }

    private static func close(_ acceptors: [LoopBound<TCPAcceptor>]) async {
        for acceptor in acceptors {
            _ = try? await acceptor.loop.submit { _ in acceptor.value.listener.close() }
        }
    }
}

/// One loop's listening socket: accepts waiting connections when it is readable and hands
/// each to `accepted`.
final class TCPAcceptor: LoopHandler {
    let listener: any ByteStreamListener
    private let accepted: (any ByteStreamSocket, LoopContext) -> Void
    /// Accepts per readiness event, so a flood of connects cannot keep the loop from its
    /// connections; the level-triggered loop reports the rest on its next pass.
    static let acceptsPerEvent = 64
    private static var logger: Logger { BraidLog.logger(label: "braid.tcp-listener") }

    init(listener: any ByteStreamListener, accepted: @escaping (any ByteStreamSocket, LoopContext) -> Void) {
        self.listener = listener
        self.accepted = accepted
    }

    func readable(_ context: LoopContext) {
        for _ in 0..<Self.acceptsPerEvent {
            do {
                guard let socket = try listener.acceptSocket() else { return }
                accepted(socket, context)
            } catch {
                // One failed accept (or options that would not apply) costs that connection,
                // never the listener.
                Self.logger.debug("accept failed: \(error)")
            }
        }
    }

    func writable(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) {}
    func close(_ context: LoopContext) { listener.close() }
}
