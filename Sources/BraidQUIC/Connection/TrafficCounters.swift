/// What went in and out of a connection, counted by the engine (ngtcp2 does not count UDP
/// datagrams or GSO batches); reported through `QUICConnection.statistics`.
struct TrafficCounters {
    /// UDP datagrams (one QUIC packet or several coalesced) and their bytes.
    private(set) var packetsSent: UInt64 = 0
    private(set) var bytesSent: UInt64 = 0
    private(set) var packetsReceived: UInt64 = 0
    private(set) var bytesReceived: UInt64 = 0
    /// RFC 9221 datagrams declared lost, or dropped before they could be sent.
    private(set) var datagramsLost: UInt64 = 0
    /// Batches (potential GSO sends) written.
    private(set) var transmits: UInt64 = 0
    /// Probe timeouts (RFC 9002 §6.2), counted only while `QUICConnection.countsProbeTimeouts`.
    private(set) var probeTimeouts: UInt64 = 0

    /// `packets` datagrams went out, `bytes` in all.
    mutating func sent(packets: Int, bytes: Int) {
        packetsSent += UInt64(packets)
        bytesSent += UInt64(bytes)
    }

    /// One batch of `packets` datagrams went out, `bytes` in all.
    mutating func sentBatch(packets: Int, bytes: Int) {
        sent(packets: packets, bytes: bytes)
        transmits += 1
    }

    /// One datagram of `bytes` came in.
    mutating func received(bytes: Int) {
        packetsReceived += 1
        bytesReceived += UInt64(bytes)
    }

    mutating func datagramLost() { datagramsLost += 1 }

    mutating func probeTimedOut(_ count: Int) { probeTimeouts += UInt64(count) }
}
