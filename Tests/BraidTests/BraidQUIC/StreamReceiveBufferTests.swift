import Testing
@testable import BraidQUIC

extension StreamReceiveBuffer {
    /// Removes up to `max` bytes as an array; `early` tells whether any arrived in 0-RTT.
    fileprivate mutating func read(max: Int) -> (bytes: [UInt8], early: Bool) {
        var out: [UInt8] = []
        let early = read(max: max) { out.append(contentsOf: $0) }
        return (out, early)
    }
}

/// The engine's per-stream receive buffer on its own: bytes in order across reads of any size,
/// the 0-RTT flag per read, and reuse of the read prefix.
@Suite struct StreamReceiveBufferTests {
    private func append(_ buffer: inout StreamReceiveBuffer, _ bytes: [UInt8], early: Bool = false) {
        bytes.withUnsafeBytes { buffer.append($0, early: early) }
    }

    @Test func bytesComeOutInOrderWhateverTheReadSizes() {
        var buffer = StreamReceiveBuffer()
        let payload = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var out: [UInt8] = []
        var position = 0
        // Appends of 1,200 bytes interleaved with reads of 700: the buffer keeps compacting.
        while out.count < payload.count {
            if position < payload.count {
                let end = min(position + 1200, payload.count)
                append(&buffer, Array(payload[position..<end]))
                position = end
            }
            out += buffer.read(max: 700).bytes
        }
        #expect(out == payload)
        #expect(buffer.isEmpty)
        #expect(buffer.read(max: 10).bytes.isEmpty)
    }

    @Test func aReadIsEarlyIfAnyOfItsBytesArrivedInZeroRTT() {
        var buffer = StreamReceiveBuffer()
        append(&buffer, [1, 2, 3], early: true)
        append(&buffer, [4, 5, 6])
        append(&buffer, [7, 8], early: true)
        let first = buffer.read(max: 2)
        #expect(first.bytes == [1, 2] && first.early)
        let second = buffer.read(max: 2)
        #expect(second.bytes == [3, 4] && second.early)
        let third = buffer.read(max: 2)
        #expect(third.bytes == [5, 6] && !third.early)
        // Compaction (the read prefix is now over half) keeps the flags with their bytes.
        append(&buffer, [9])
        let fourth = buffer.read(max: 10)
        #expect(fourth.bytes == [7, 8, 9] && fourth.early)
        append(&buffer, [10])
        #expect(buffer.read(max: 10) == ([10], false))
    }

    @Test func discardDropsEverythingBuffered() {
        var buffer = StreamReceiveBuffer()
        append(&buffer, [1, 2, 3])
        _ = buffer.read(max: 1)
        #expect(buffer.discard() == 2)
        #expect(buffer.isEmpty)
    }
}
