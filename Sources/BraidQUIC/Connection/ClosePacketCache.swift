/// Our CONNECTION_CLOSE, kept for the closing period (RFC 9000 §10.2.1). Packets that keep
/// arriving are answered with it again, but less and less often (on the 1st, 2nd, 4th, 8th...
/// arrival), so a peer that keeps sending cannot make us send as much back.
struct ClosePacketCache {
    /// The packet as first written.
    private(set) var packet: [UInt8] = []
    /// The packet is due to be sent (again).
    private(set) var isPending = false
    /// Packets that arrived since the connection started closing.
    private var arrivals = 0

    /// Keeps `packet` and makes it due once.
    mutating func store(_ packet: [UInt8]) {
        self.packet = packet
        isPending = true
    }

    /// A packet arrived while closing: on powers of two the close is due again.
    mutating func packetArrived() {
        arrivals += 1
        if arrivals & (arrivals - 1) == 0 { isPending = true }
    }

    /// The due packet went out.
    mutating func markSent() { isPending = false }
}
