import BraidIO

/// TLS over TCP: the byte-stream binding TCP uses, with a TLS layer over each socket (see
/// `TLS+ByteStreamLayering`).
extension TLS: StackBinding {
    private var byteStream: ByteStreamStack { ByteStreamStack(tcp: tcp, layering: self) }

    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        byteStream.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: maximumMessageSize)
    }

    func startClient(_ start: ClientStart) throws {
        try byteStream.startClient(start)
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try await byteStream.startListener(listener)
    }
}
