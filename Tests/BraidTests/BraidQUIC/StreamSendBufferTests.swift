import Testing
@testable import BraidQUIC

/// The engine's per-stream send buffer on its own: the regions handed to ngtcp2 start at the
/// first unsent byte whatever has been sent, acknowledged or rewound.
@Suite struct StreamSendBufferTests {
    /// The unsent regions' bytes, concatenated.
    private func unsent(_ buffer: StreamSendBuffer, limit: Int = 16) -> [UInt8] {
        var out: [UInt8] = []
        buffer.unsentRegions(limit: limit) { base, count in
            out += Array(UnsafeRawBufferPointer(start: base, count: count))
        }
        return out
    }

    @Test func regionsFollowSentAndAcknowledgedOffsets() {
        var buffer = StreamSendBuffer()
        let payload = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
        let bytes = StreamBytes(copying: payload)
        // Four pieces of one allocation, as a large send is split.
        for start in stride(from: 0, to: 1000, by: 250) { buffer.append(bytes, range: start..<start + 250) }
        #expect(unsent(buffer) == payload)
        buffer.markSent(300)
        #expect(unsent(buffer) == Array(payload[300...]))
        #expect(unsent(buffer, limit: 1) == Array(payload[300..<500]))
        buffer.acknowledge(upTo: 260)
        #expect(unsent(buffer) == Array(payload[300...]))
        buffer.markSent(450)
        buffer.acknowledge(upTo: 750)
        #expect(unsent(buffer) == Array(payload[750...]))
        buffer.markSent(250)
        #expect(unsent(buffer).isEmpty)
        buffer.append(StreamBytes(copying: [7, 8]), range: 0..<2)
        #expect(unsent(buffer) == [7, 8])
        #expect(buffer.unacknowledged == 252)
    }

    @Test func rewindSendsEverythingAgain() {
        var buffer = StreamSendBuffer()
        buffer.append(StreamBytes(copying: [1, 2, 3]), range: 0..<3)
        buffer.append(StreamBytes(copying: [4, 5]), range: 0..<2)
        buffer.markSent(4)
        #expect(unsent(buffer) == [5])
        buffer.rewind()
        #expect(unsent(buffer) == [1, 2, 3, 4, 5])
        buffer.discard()
        #expect(unsent(buffer).isEmpty && !buffer.hasUnsent)
    }
}
