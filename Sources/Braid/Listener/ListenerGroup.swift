import BraidIO

/// What a running listener keeps of its sockets and loops, whatever the stack.
protocol ListenerGroup: Sendable {
    /// The address listened on (with the port the system chose).
    var localAddress: SocketAddress { get }
    /// Takes no new connections from now on (QUIC: refused with CONNECTION_REFUSED; TLS and
    /// TCP: the listening sockets close); those already accepted carry on. Returns at once.
    func stopAccepting()
    /// Stops listening (QUIC: closing every connection too).
    func close() async
    /// The system calls, datagrams and bytes of the sockets all connections share, so far
    /// (nil: each connection has its own socket, or the stack does not count them).
    var sharedSocketStatistics: SocketCounters? { get async }
    /// The live counts and refusals of a QUIC listener (nil for other stacks).
    var listenerStatistics: ListenerStatistics? { get async }
}

extension ListenerGroup {
    var sharedSocketStatistics: SocketCounters? { get async { nil } }
    var listenerStatistics: ListenerStatistics? { get async { nil } }
}
