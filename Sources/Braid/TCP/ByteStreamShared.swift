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
