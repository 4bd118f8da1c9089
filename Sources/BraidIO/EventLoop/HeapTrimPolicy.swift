import CBraidUDP

/// When a listener's loop (QUIC, TLS, TCP or UDP) gives freed heap back to the system. glibc
/// keeps what is freed in its arenas, so after a flood of handshakes (about 110 KiB each) or
/// thousands of connections ended, the process would stay at its peak size. Each time the live connections fall to half of their
/// peak since the last trim, and at least `minimumDrop` fewer, `malloc_trim` releases the free
/// pages: rare (once per halving), and never on the packet path. A few connections can hold
/// far more than a flood of idle ones (a peer that grants no credit keeps a connection's whole
/// send budget queued), so the bytes the connections hold, sampled by the listener's buffer
/// sweep, trigger a trim the same way: at half their peak and at least `minimumBytesDrop` less.
package struct HeapTrimPolicy {
    package static let minimumDrop = 64
    package static let minimumBytesDrop = 16 << 20
    private var peak = 0
    private var peakBytes = 0
    /// Trims done so far.
    package private(set) var trims = 0

    package init() {}

    /// The live connection count changed; trims when it fell far enough.
    package mutating func connectionsChanged(to count: Int) {
        if count > peak {
            peak = count
            return
        }
        guard peak - count >= Self.minimumDrop, count <= peak / 2 else { return }
        peak = count
        trim()
    }

    /// The bytes the loop's connections hold now (their queued and unread stream bytes);
    /// trims when they fell far enough.
    package mutating func heldBytesChanged(to bytes: Int) {
        if bytes > peakBytes {
            peakBytes = bytes
            return
        }
        guard peakBytes - bytes >= Self.minimumBytesDrop, bytes <= peakBytes / 2 else { return }
        peakBytes = bytes
        trim()
    }

    private mutating func trim() {
        trims += 1
        ReceivedBlockPool.drain()
        _ = braid_malloc_trim()
    }
}
