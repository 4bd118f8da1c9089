/// A change a server connection makes to the connection IDs it can be reached by. The
/// connection only records these (it holds no pointer to its endpoint); the endpoint applies
/// them to its routing table in `QUICServerEndpoint.applyRoutingChanges(of:)`.
enum QUICRoutingChange: Hashable, Sendable {
    /// A new connection ID was issued to the peer: datagrams carrying it belong to us.
    case issued(ConnectionID)
    /// The peer retired a connection ID: the route for it goes.
    case retired(ConnectionID)
    /// The connection ended: every route goes, and it no longer counts as live.
    case terminated
}
