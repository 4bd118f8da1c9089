import BraidIO

/// A UDP connection's core: its `DatagramChannel`, whose queues the caller's tasks use directly.
extension ConnectionCore {
    /// The core of a UDP connection (and of `Coder` over UDP): datagrams each way.
    convenience init(datagramsOn loop: EventLoop, endpointDescription: String) {
        let channel = DatagramChannel(loop: loop) { error in NetworkError(error, endpoint: endpointDescription) }
        // UDP connections carry no QUIC datagrams: that queue stays empty and closed.
        let datagramInbox = DatagramInbox(backlog: 0)
        datagramInbox.finish()
        self.init(
            channel: channel,
            shared: ConnectionShared(datagramInbox: datagramInbox, datagramOutbox: channel.outbox, udpInbox: channel.inbox),
            endpointDescription: endpointDescription)
        channel.delegate = self
    }

    /// The datagram channel (of a UDP connection, whose API alone calls this).
    var datagram: DatagramChannel {
        guard let channel = owner as? DatagramChannel else { preconditionFailure("a UDP call on a \(type(of: owner)) connection") }
        return channel
    }
}
