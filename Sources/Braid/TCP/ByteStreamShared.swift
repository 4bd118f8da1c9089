import BraidIO

/// What a TLS or TCP connection shares with the caller's tasks: its one byte stream each way
/// and, for `TLV` and `Coder` over it, the message decoder.
final class ByteStreamShared: ConnectionStackPart {
    let end: ByteStreamEnd
    /// The message decoder over `end`, for `TLV` and `Coder` stacks (nil otherwise).
    let messageReceiver: MessageReceiver?

    init(end: ByteStreamEnd, messageReceiver: MessageReceiver?) {
        self.end = end
        self.messageReceiver = messageReceiver
    }
}

extension ConnectionShared {
    /// The connection's byte stream, for TLS and TCP (nil for other stacks).
    var byteStream: ByteStreamShared? { stackPart(as: ByteStreamShared.self) }
}

/// A layer with state of its own on both sides of the connection's byte stream (a custom
/// framer's messages in transit): it gets the connection's part before the channel runs it.
protocol ConnectionSharingLayer: ByteStreamLayer {
    func share(with part: ByteStreamShared)
}

extension ByteStreamShared {
    /// Hands `layer` the connection's part if it keeps state on both sides; called before the
    /// channel attaches it.
    func adopt(_ layer: (any ByteStreamLayer)?) {
        (layer as? any ConnectionSharingLayer)?.share(with: self)
    }
}
