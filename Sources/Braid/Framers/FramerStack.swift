import BraidIO
import BraidWebSocketIO

/// A custom framer over TLS or TCP, whichever dialect named it: `Framer<T>` in the new API,
/// `NWProtocolFramer.Options` in the classic one. Its connections are the byte-stream
/// binding's with a `FramerLayer` over each socket (over TLS's layer, or a pass-through one),
/// and the message receiver framed stacks use above it.
struct FramerStack: NetworkProtocol {
    let definition: NWProtocolFramer.Definition
    let lower: ByteStreamLower
    /// The largest message the framer may deliver (16 MiB by default).
    var maximumMessageSize = TLVFraming.defaultMaximumMessageSize

    init(definition: NWProtocolFramer.Definition, over lower: some NetworkProtocol) {
        self.definition = definition
        self.lower = ByteStreamLower(lower) { "the framer \(definition.name) over \($0) (a custom framer runs over a byte stream: TLS or TCP)" }
    }
}

extension FramerStack: ByteStreamLayeredStack {
    func layering(tls: TLS?) -> any ByteStreamLayering { FramerLayering(framer: self, tls: tls) }
}

/// A framer layer over each connection's socket, over TLS's layer or a pass-through one.
struct FramerLayering: UpperLayering {
    let framer: FramerStack
    let tls: TLS?

    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        let inner = try innerClientLayer(endpoint: endpoint, remote: remote)
        return FramerLayer(definition: framer.definition, maximumMessageSize: framer.maximumMessageSize, over: inner, endHoldLimit: handshakeTimeout)
    }

    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let innerLayers = try innerServerLayers()
        let definition = framer.definition, maximumMessageSize = framer.maximumMessageSize, endHoldLimit = handshakeTimeout
        return {
            FramerLayer(definition: definition, maximumMessageSize: maximumMessageSize, over: try innerLayers(), endHoldLimit: endHoldLimit)
        }
    }
}
