/// A change a server connection makes to the connection IDs it can be reached by, or to what
/// its endpoint counts it as (half-open, live). The
/// connection only records these (it holds no pointer to its endpoint); the endpoint applies
/// them to its routing table in `QUICServerEndpoint.applyRoutingChanges(of:)`.
enum QUICRoutingChange: Hashable, Sendable {
    /// A new connection ID was issued to the peer: datagrams carrying it belong to us.
    case issued(ConnectionID)
    /// The peer retired a connection ID: the route for it goes.
    case retired(ConnectionID)
    /// The handshake completed: no longer a half-open handshake, and the client's address is
    /// proven (it read our Handshake packets).
    case handshakeCompleted
    /// The connection ended: every route goes, and it no longer counts as live.
    case terminated
}
