import BraidIO
import CBraidUDP

/// When a server gives freed heap back to the system. glibc keeps what is freed in its arenas,
/// so after a flood of handshakes (about 110 KiB each) or thousands of connections ended, the
/// process would stay at its peak size. Each time the live connections fall to half of their
/// peak since the last trim, and at least `minimumDrop` fewer, `malloc_trim` releases the free
/// pages: rare (once per halving), and never on the packet path.
struct HeapTrimPolicy {
    static let minimumDrop = 64
    private var peak = 0
    /// Trims done so far.
    private(set) var trims = 0

    /// The live connection count changed; trims when it fell far enough.
    mutating func connectionsChanged(to count: Int) {
        if count > peak {
            peak = count
            return
        }
        guard peak - count >= Self.minimumDrop, count <= peak / 2 else { return }
        peak = count
        trims += 1
        _ = braid_malloc_trim()
    }
}
