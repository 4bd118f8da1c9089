import BraidIO

/// What the public objects read without a trip to the loop: set by the loop at ready.
struct ConnectionSnapshot: Sendable {
    var negotiatedALPN: String?
    var usableDatagramFrameSize: Int?
    var localEndpoint: NWEndpoint?
    var remoteEndpoint: NWEndpoint?
    var earlyDataAccepted = false
    var multipath = false
    /// TLS over TCP: the handshake resumed a session.
    var resumed = false
    /// What a security layer agreed (TLS metadata), once ready.
    var security: SecurityFacts?
    /// What an upgrade (WebSocket's) agreed, once ready.
    var upgrade: UpgradeFacts?
    /// The path the connection's watch last worked out (nil: none yet, or no watch).
    var path: NWPath?
}
