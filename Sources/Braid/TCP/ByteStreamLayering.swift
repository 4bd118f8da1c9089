import BraidIO

/// What the byte-stream binding runs over each of its connections' sockets: a
/// `ByteStreamLayer` made per connection (TLS's, see `TLS+ByteStreamLayering`). Plain TCP has
/// none; the binding keeps the rest (sockets, the race, listening, the channel).
protocol ByteStreamLayering: Sendable {
    /// How long the layer may take to become ready (its handshake) once TCP is connected.
    var handshakeTimeout: Duration { get }
    /// Checks a client's options before establishment starts: what it throws fails the
    /// connection.
    func validateClient() throws
    /// A client's layer over the socket that connected to `remote`, one of `endpoint`'s
    /// addresses. Called on the connection's loop.
    func clientLayer(endpoint: NWEndpoint, remote: SocketAddress) throws -> any ByteStreamLayer
    /// A listener's layers: what its connections share is made once, here; the maker is then
    /// called on a loop for each accepted socket.
    func serverLayers() throws -> @Sendable () throws -> any ByteStreamLayer
}
