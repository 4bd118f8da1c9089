import BraidIO

/// A stack that is a layer of its own over TLS or TCP (WebSocket, a custom framer): its binding
/// is the byte-stream one (`ByteStreamStack`) with its layering over each socket, and its
/// messages ride on the connection up to `maximumMessageSize`. Over anything else every start
/// fails with `NetworkError.unsupported`, naming what was asked.
protocol ByteStreamLayeredStack: StackBinding {
    /// The stack below.
    var lower: ByteStreamLower { get }
    /// The largest message the layer delivers.
    var maximumMessageSize: Int { get }
    /// What runs over each connection's socket, over TLS's layer (`tls`) or over plain TCP (nil).
    func layering(tls: TLS?) -> any ByteStreamLayering
}

/// TLS or TCP under a layer of its own, or what else was asked for (which cannot run it).
enum ByteStreamLower: Sendable {
    case tls(TLS)
    case tcp(TCP)
    /// Why the stack below cannot run the layer.
    case unsupported(String)

    /// `lower` as TLS or TCP; anything else is `unsupported(reason)`.
    init(_ lower: some NetworkProtocol, unsupported reason: (String) -> String) {
        switch lower {
        case let tls as TLS: self = .tls(tls)
        case let tcp as TCP: self = .tcp(tcp)
        default: self = .unsupported(reason(String(describing: type(of: lower))))
        }
    }
}

extension ByteStreamLayeredStack {
    /// The byte-stream binding under the layer (nil: the stack below cannot run it).
    private var byteStream: ByteStreamStack? {
        switch lower {
        case .tls(let tls): ByteStreamStack(tcp: tls.tcp, layering: layering(tls: tls))
        case .tcp(let tcp): ByteStreamStack(tcp: tcp, layering: layering(tls: nil))
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
