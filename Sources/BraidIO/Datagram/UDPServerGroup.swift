import BraidCore
import Logging

/// A UDP listener spread over event loops: one socket per loop on the shared port
/// (SO_REUSEPORT, so the kernel keeps each remote address on one socket), each demultiplexing
/// its datagrams by remote address into one `DatagramChannel` per peer, on its own loop.
package final class UDPServerGroup: Sendable {
    /// The address all sockets share (with the port the kernel chose, if 0 was asked for).
    package let localAddress: SocketAddress
    package let demultiplexers: [LoopBound<UDPDemultiplexer>]

    private init(localAddress: SocketAddress, demultiplexers: [LoopBound<UDPDemultiplexer>]) {
        self.localAddress = localAddress
        self.demultiplexers = demultiplexers
    }

    /// Binds one socket per loop and starts reading.
    /// - Parameters:
    ///   - unixPath: serve a Unix-domain datagram socket there instead of `address`: one
    ///     socket, on the first loop.
    ///   - idleTimeout: a peer's channel that sends and receives nothing for this long ends
    ///     (`DatagramChannelError.idleTimeout`).
    ///   - peersNeedProof: new peers start unproven and may be displaced by newer ones while the
    ///     listener is full (`UDPDemultiplexer.displaceUnprovenPeer`); false when the stack
    ///     proves a peer's address before it gets a channel (DTLS).
    ///   - budget: the listener's buffer budget, which each loop's peers count against
    ///     (`UDPDemultiplexer.watchBufferBudget`); nil: none.
    ///   - makeAccept: called on each loop; returns what makes the channel of a new peer (on
    ///     the loop), or nil to drop the datagram (the listener is full).
    package static func start(
        loops: [EventLoop], bindTo address: SocketAddress, unixPath: UnixSocketPath? = nil, batching: BatchingOptions,
        idleTimeout: Duration, peersNeedProof: Bool = false,
        sockets: any DatagramSocketFactory, budget: ListenerBufferBudget? = nil,
        makeAccept: @escaping @Sendable (LoopContext) -> (UnsafeRawBufferPointer, DatagramMetadata, UDPDemultiplexer, LoopContext) -> DatagramChannel?
    ) async throws -> UDPServerGroup {
        precondition(!loops.isEmpty, "a server group needs a loop")
        // A Unix-domain path cannot be shared: it gets one socket, on the first loop.
        let (demultiplexers, bound) = try await PerLoopBinding.bind(loops: unixPath == nil ? loops : [loops[0]], to: address) {
            _, target, context throws -> (UDPDemultiplexer, SocketAddress) in
            let socket =
                try unixPath.map { try sockets.bind(unixPath: $0) }
                ?? sockets.bind(target, batching: batching, receiveSlots: 32, sendBatches: 16, reusePort: loops.count > 1)
            try (socket as? UDPSocket)?.allowFragmentation()
            let demultiplexer = UDPDemultiplexer(
                socket: socket, idleTimeout: idleTimeout, peersNeedProof: peersNeedProof, accept: makeAccept(context))
            do {
                try demultiplexer.start(context)
                if let budget { demultiplexer.watchBufferBudget(budget, context: context) }
            } catch {
                socket.close()
                throw error
            }
            return (demultiplexer, socket.localAddress)
        } closingOnFailure: { await close($0) }
        return UDPServerGroup(localAddress: bound, demultiplexers: demultiplexers)
    }

    /// Stops listening: every peer's channel ends (`cancelled`) and the sockets close.
    package func close() async {
        await Self.close(demultiplexers)
    }

    private static func close(_ demultiplexers: [LoopBound<UDPDemultiplexer>]) async {
        for demultiplexer in demultiplexers {
            _ = try? await demultiplexer.loop.submit { context in demultiplexer.value.close(context) }
        }
    }
}
