import BraidIO

/// A TCP connection's core (with a layer such as TLS over it, or none): its
/// `ByteStreamChannel`, and the connection's one byte stream each way, which the caller reaches
/// through a `ByteStreamEnd`.
extension ConnectionCore {
    /// The core of a TLS or TCP connection; with `maximumMessageSize`, a `TLV` or `Coder`
    /// connection, whose messages travel on the byte stream. `borrowsLargeSends`: large sends
    /// of contiguous memory are written from the caller's value (plain TCP).
    convenience init(
        byteStreamOn loop: EventLoop, endpointDescription: String, tcp: TCP, handshakeTimeout: Duration,
        maximumMessageSize: Int? = nil, borrowsLargeSends: Bool = false
    ) {
        let channel = ByteStreamChannel(
            loop: loop, sendLimit: tcp.sendBufferLimit, receiveLimit: tcp.receiveBufferLimit, handshakeTimeout: handshakeTimeout
        ) { error in
            NetworkError(error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout)
        }
        // Not yet on the loop: the channel is handed over with the core.
        let bound = LoopBound(handingOver: channel, to: loop)
        let end = ByteStreamEnd(
            inbox: channel.inbox, outbox: channel.outbox,
            postPump: { loop.execute { context in bound.value.pump(context) } },
            postCreditPass: { loop.execute { context in bound.value.returnConsumedCredit(context) } },
            borrowsLargeSends: borrowsLargeSends)
        self.init(
            channel: channel,
            shared: ConnectionShared(
                stackPart: ByteStreamShared(end: end, messageReceiver: maximumMessageSize.map(MessageReceiver.init(maximumMessageSize:)))),
            endpointDescription: endpointDescription)
        channel.delegate = self
    }

    /// A byte-stream core with TCP's defaults that never starts: a framer's over a stack Braid
    /// cannot run (`UnsupportedStack`), whose API reads its message receiver until the start fails.
    convenience init(unstartedByteStreamOn loop: EventLoop, endpointDescription: String, maximumMessageSize: Int) {
        self.init(
            byteStreamOn: loop, endpointDescription: endpointDescription, tcp: TCP(), handshakeTimeout: TLS().handshakeTimeout,
            maximumMessageSize: maximumMessageSize)
    }

    /// The byte-stream channel (of a TLS or TCP connection, whose API alone calls this).
    var byteStream: ByteStreamChannel {
        guard let channel = owner as? ByteStreamChannel else {
            preconditionFailure("a byte-stream call on a \(type(of: owner)) connection")
        }
        return channel
    }

    /// Ends a byte-stream connection with `error` at once (its socket closes): a framed
    /// connection whose stream lost its message boundaries.
    func failByteStream(_ error: NetworkError, context: LoopContext) {
        byteStream.fail(error, context: context)
    }
}
