import BraidIO

/// WebSocket over TLS or TCP: the byte-stream binding those use, with a WebSocket layer over
/// each socket (`WebSocket+ByteStreamLayering`) and the message receiver framed stacks use,
/// told the largest message.
extension WebSocket: StackBinding {
    /// The byte-stream binding under the WebSocket layer (nil: a stack below it cannot run).
    private var byteStream: ByteStreamStack? {
        switch lower {
        case .tls(let tls): ByteStreamStack(tcp: tls.tcp, layering: WebSocketLayering(socket: self, tls: tls))
        case .tcp(let tcp): ByteStreamStack(tcp: tcp, layering: WebSocketLayering(socket: self, tls: nil))
        case .unsupported: nil
        }
    }

    private var unsupported: UnsupportedStack {
        let what = if case .unsupported(let what) = lower { what } else { "" }
        return UnsupportedStack(connectionReason: what, listenerReason: what + " (listener)")
    }

    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        guard let byteStream else {
            return unsupported.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: self.maximumMessageSize)
        }
        return byteStream.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: self.maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        guard let byteStream else { return try unsupported.startClient(start) }
        try byteStream.startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        guard let byteStream else { return try await unsupported.startListener(listener) }
        var listener = listener
        listener.maximumMessageSize = maximumMessageSize
        return try await byteStream.startListener(listener)
    }
}
