import BraidIO
import BraidWebSocketIO

/// A custom framer over TLS or TCP, whichever dialect named it: `Framer<T>` in the new API,
/// `NWProtocolFramer.Options` in the classic one. Its connections are the byte-stream
/// binding's with a `FramerLayer` over each socket (over TLS's layer, or a pass-through one),
/// and the message receiver framed stacks use above it.
struct FramerStack: NetworkProtocol {
    enum Lower: Sendable {
        case tls(TLS)
        case tcp(TCP)
        case unsupported(String)
    }

    let definition: NWProtocolFramer.Definition
    let lower: Lower
    /// The largest message the framer may deliver (16 MiB by default).
    var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    init(definition: NWProtocolFramer.Definition, over lower: some NetworkProtocol) {
        self.definition = definition
        switch lower {
        case let tls as TLS: self.lower = .tls(tls)
        case let tcp as TCP: self.lower = .tcp(tcp)
        default:
            self.lower = .unsupported(
                "the framer \(definition.name) over \(type(of: lower)) (a custom framer runs over a byte stream: TLS or TCP)")
        }
    }

    /// The byte-stream binding under the framer (nil: the stack below cannot run it).
    private var byteStream: ByteStreamStack? {
        switch lower {
        case .tls(let tls): ByteStreamStack(tcp: tls.tcp, layering: FramerLayering(framer: self, tls: tls))
        case .tcp(let tcp): ByteStreamStack(tcp: tcp, layering: FramerLayering(framer: self, tls: nil))
        case .unsupported: nil
        }
    }

    private var unsupported: UnsupportedStack {
        let what = if case .unsupported(let what) = lower { what } else { "" }
        return UnsupportedStack(connectionReason: what, listenerReason: what + " (listener)")
    }
}

extension FramerStack: StackBinding {
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

/// A framer layer over each connection's socket, over TLS's layer or a pass-through one.
struct FramerLayering: ByteStreamLayering {
    let framer: FramerStack
    let tls: TLS?

    var handshakeTimeout: Duration { tls?.handshakeTimeout ?? TLS().handshakeTimeout }

    func validateClient() throws {
        try tls?.validateClient()
    }

    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        let inner: any ByteStreamLayer = try tls?.clientLayer(endpoint: endpoint, remote: remote) ?? PlainByteStreamLayer()
        return FramerLayer(definition: framer.definition, maximumMessageSize: framer.maximumMessageSize, over: inner)
    }

    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let innerLayers = try tls?.serverLayers()
        let definition = framer.definition, maximumMessageSize = framer.maximumMessageSize
        return {
            let inner: any ByteStreamLayer = try innerLayers?() ?? PlainByteStreamLayer()
            return FramerLayer(definition: definition, maximumMessageSize: maximumMessageSize, over: inner)
        }
    }
}
