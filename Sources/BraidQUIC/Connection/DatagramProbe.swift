/// Keeps a flight of DATAGRAM-only packets from stalling.
///
/// ngtcp2 0.12.1 does not arm its probe timeout (PTO) for packets that carry only DATAGRAM
/// frames (upstream fixed this in v0.14.0). If the ACKs for such a flight are lost while it
/// fills the congestion window, neither end sends again until the idle timeout. So while
/// datagrams are unacknowledged, the keep-alive is shortened to the PTO (doubling on each
/// expiry without progress): after that much silence ngtcp2 sends a PING, whose ACK lets loss
/// detection run. `windowAllows` keeps room in the window for that PING.
///
/// Bookkeeping only: the connection passes in ngtcp2's values (PTO, window) and sets the
/// keep-alive this asks for.
struct DatagramProbe {
    /// Doublings of the shortened keep-alive at most (64 PTOs of silence).
    static let maxBackoff = 6

    /// The keep-alive the user configured, in nanoseconds (0: off).
    let configuredKeepAlive: UInt64
    /// The keep-alive currently set on ngtcp2.
    private(set) var appliedKeepAlive: UInt64
    /// Datagrams handed to ngtcp2 and not yet acknowledged or declared lost.
    private(set) var inFlight = 0
    /// Shortened keep-alives that fired in a row without a datagram being acknowledged or lost.
    private(set) var backoff = 0
    /// Last send or receive: ngtcp2 counts the keep-alive from the same instants.
    private(set) var lastActivity = QUICInstant(nanoseconds: 0)

    /// Starts with ngtcp2's keep-alive set to `configuredKeepAlive`.
    init(configuredKeepAlive: UInt64) {
        self.configuredKeepAlive = configuredKeepAlive
        appliedKeepAlive = configuredKeepAlive
    }

    /// A datagram went into a packet.
    mutating func datagramSent() { inFlight += 1 }

    /// A datagram was acknowledged or declared lost: the flight made progress.
    mutating func datagramResolved() {
        inFlight = max(inFlight - 1, 0)
        backoff = 0
    }

    /// Something was sent or received at `now`.
    mutating func noteActivity(at now: QUICInstant) { lastActivity = now }

    /// The connection's timer fired at `now` (call before ngtcp2 handles the expiry). When it is
    /// the shortened keep-alive, the next write carries the PING and the next keep-alive is
    /// twice as long; it changes only after that write, since changing it now would un-expire it.
    mutating func timerFired(at now: QUICInstant) {
        if inFlight > 0 && now.nanoseconds >= lastActivity.nanoseconds &+ appliedKeepAlive {
            backoff = min(backoff + 1, Self.maxBackoff)
        }
    }

    /// The keep-alive ngtcp2 must be set to now, given its current `pto`; nil if it has it already.
    /// `pto` is only evaluated while datagrams are in flight (this runs after every input).
    mutating func keepAliveChange(pto: @autoclosure () -> UInt64) -> UInt64? {
        var wanted = configuredKeepAlive
        if inFlight > 0 {
            let probe = pto() << UInt64(backoff)
            wanted = wanted == 0 ? probe : min(wanted, probe)
        }
        guard wanted != appliedKeepAlive else { return nil }
        appliedKeepAlive = wanted
        return wanted
    }

    /// A datagram may take the congestion window only if a full packet of room stays free
    /// afterwards, for the keep-alive PING.
    static func windowAllows(congestionWindowLeft: UInt64, packetSize: UInt64) -> Bool {
        congestionWindowLeft >= 2 * packetSize
    }
}
