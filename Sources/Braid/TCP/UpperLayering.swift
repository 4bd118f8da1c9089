import BraidIO
import BraidWebSocketIO

/// A layering whose layer runs over TLS's layer, or over a pass-through one on plain TCP
/// (WebSocket, a custom framer): the handshake timeout, the client's checks and the layer
/// below come from TLS's options when there are any.
protocol UpperLayering: ByteStreamLayering {
    /// TLS's options under the layer; nil: plain TCP.
    var tls: TLS? { get }
}

extension UpperLayering {
    /// TLS's, or TLS's default over plain TCP (the upper layer's own handshake is bounded too).
    var handshakeTimeout: Duration { tls?.handshakeTimeout ?? TLS().handshakeTimeout }

    func validateClient() throws {
        try tls?.validateClient()
    }

    /// The layer below a client's upper layer.
    func innerClientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        try tls?.clientLayer(endpoint: endpoint, remote: remote) ?? PlainByteStreamLayer()
    }

    /// The maker of the layer below each of a listener's upper layers.
    func innerServerLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let innerLayers = try tls?.serverLayers()
        return { try innerLayers?() ?? PlainByteStreamLayer() }
    }
}
