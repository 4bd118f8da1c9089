import BraidIO

/// WebSocket over TLS or TCP: the byte-stream binding those use, with a WebSocket layer over
/// each socket (`WebSocket+ByteStreamLayering`) and the message receiver framed stacks use,
/// told the largest message.
extension WebSocket: ByteStreamLayeredStack {
    func layering(tls: TLS?) -> any ByteStreamLayering { WebSocketLayering(socket: self, tls: tls) }
}
