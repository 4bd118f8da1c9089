import BraidIO
import BraidTLS
import BraidTLSIO

/// TLS is the TCP binding plus a TLS layer: a `TLSLayer` over each connection's socket.
extension TLS: ByteStreamLayering {
    /// Builds (and caches) the client context, so options GnuTLS refuses (a cipher suite it
    /// lacks) fail the connection before it dials.
    func validateClient() throws {
        _ = try TLSClientContexts.context(for: self)
    }

    /// The client engine for `endpoint` (SNI and the certificate's name: `serverName`, else the
    /// endpoint's host), resuming with a cached ticket when there is one; with early data
    /// enabled and a ticket that allows it, the layer sends idempotent sends as 0-RTT data.
    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer {
        let serverName = serverName ?? endpoint.host.description
        // A ticket resumes only under the checks that accepted the server and as the client
        // that earned it.
        let identity = TLSIdentityMaterial.resumptionScope(identityMaterial, certificateChainFile: certificateChainFile)
        let key = "tls:\(serverName):\(remote.port):\(verification.resumptionScope):\(identity)"
        // A verify block's verdict cannot be carried over to a resumed session (the block is
        // not asked again), so connections with one neither resume nor keep tickets.
        let sessionCache = peerVerifier == nil ? sessionCache : nil
        let ticket = sessionCache?.takeTLS(key)
        let engine = try TLSConnection.client(context: try TLSClientContexts.context(for: self), serverName: serverName, resumption: ticket)
        // The engine's ticket: nil if it did not keep a stale one.
        let layer = TLSLayer(engine, earlyData: earlyDataEnabled && (engine.resumption?.maxEarlyDataSize ?? 0) > 0)
        layer.peerJudge = peerVerifier?.judge
        if let cache = sessionCache {
            layer.ticketReceived = { ticket in cache.storeTLS(ticket, for: key) }
        }
        return layer
    }

    /// One server context per listener (its ticket key lives as long as the listener), an
    /// engine over it per accepted connection.
    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer {
        let context = try TLSServerContexts.make(for: self)
        let judge = peerVerifier?.judge
        return {
            let layer = TLSLayer(try TLSConnection.server(context: context))
            layer.peerJudge = judge
            return layer
        }
    }
}
