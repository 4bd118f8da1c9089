import BraidIO

/// A UDP connection's core: its `DatagramChannel`, whose queues the caller's tasks use directly.
extension ConnectionCore {
    /// The core of a UDP connection (and of `Coder` over UDP): datagrams each way.
    convenience init(datagramsOn loop: EventLoop, endpointDescription: String) {
        let channel = DatagramChannel(loop: loop) { error in NetworkError(error, endpoint: endpointDescription) }
        self.init(
            channel: channel, shared: ConnectionShared(stackPart: DatagramShared(outbox: channel.outbox, inbox: channel.inbox)),
            endpointDescription: endpointDescription)
        channel.delegate = self
    }

    /// The datagram channel (of a UDP connection, whose API alone calls this).
    var datagram: DatagramChannel {
        guard let channel = owner as? DatagramChannel else { preconditionFailure("a UDP call on a \(type(of: owner)) connection") }
        return channel
    }
}
