/// The kernel's limits on one segmented UDP send (UDP_SEGMENT, "GSO"), and how a segmented
/// buffer splits into datagrams. Engines lay out their batches to these limits; the datapath
/// hands such a batch to the kernel whole, or splits it where GSO is off.
public enum UDPSegmentation {
    /// Most datagrams one GSO send may carry (the kernel's UDP_MAX_SEGMENTS).
    public static let maxSegments = 64
    /// Most bytes one GSO send may carry: the UDP payload limit of one IPv4 datagram
    /// (65535 - 20 - 8).
    public static let maxBytes = 65507

    /// Calls `body` with each datagram of `buffer`: every one `segmentSize` bytes long but the
    /// last, which may be shorter (what the kernel does with a GSO send or a GRO receive).
    @inlinable public static func forEachSegment(
        of buffer: UnsafeRawBufferPointer, segmentSize: Int, _ body: (UnsafeRawBufferPointer) -> Void
    ) {
        var offset = 0
        while offset < buffer.count {
            let end = min(offset + max(segmentSize, 1), buffer.count)
            body(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]))
            offset = end
        }
    }
}
