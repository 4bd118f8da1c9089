/// One UDP send: a run of QUIC packets for one path and ECN mark, laid out back to back.
///
/// Every packet but the last is exactly `segmentSize` bytes, so the datapath can hand the
/// whole buffer to the kernel as one UDP_SEGMENT (GSO) send, or split it into datagrams.
package struct Transmit: Sendable {
    package var path: QUICPath
    package var ecn: ECN
    package var segmentSize: Int
    package var bytes: [UInt8]

    /// Number of UDP datagrams this transmit carries.
    package var segmentCount: Int { segmentSize == 0 ? 0 : (bytes.count + segmentSize - 1) / segmentSize }

    /// The individual datagrams.
    package var datagrams: [ArraySlice<UInt8>] {
        stride(from: 0, to: bytes.count, by: max(segmentSize, 1)).map {
            bytes[$0..<min($0 + segmentSize, bytes.count)]
        }
    }

    /// Calls `body` with each UDP datagram of a batch laid out as `writeTransmits` produces it
    /// (what the kernel does with a GSO send; also what a sender without GSO must do).
    package static func forEachDatagram(
        in batch: UnsafeRawBufferPointer, segmentSize: Int, _ body: (UnsafeRawBufferPointer) -> Void
    ) {
        UDPSegmentation.forEachSegment(of: batch, segmentSize: segmentSize, body)
    }
}
