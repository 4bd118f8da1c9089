import Testing

import BraidIO

/// A server gives freed heap back each time its connections fall to half their peak (and by
/// at least `minimumDrop`), not on every connection that ends.
@Suite struct HeapTrimPolicyTests {
    @Test func trimsOncePerHalving() {
        var policy = HeapTrimPolicy()
        for count in 1...1000 { policy.connectionsChanged(to: count) }
        #expect(policy.trims == 0)
        for count in stride(from: 999, through: 501, by: -1) { policy.connectionsChanged(to: count) }
        #expect(policy.trims == 0, "above half the peak: no trim")
        policy.connectionsChanged(to: 500)
        #expect(policy.trims == 1)
        for count in stride(from: 499, through: 0, by: -1) { policy.connectionsChanged(to: count) }
        // 500 -> 250 -> 125 -> 61 (each at most half and at least 64 fewer); 61 -> 0 is only 61 fewer.
        #expect(policy.trims == 4)
        // A small server that comes and goes never trims.
        var small = HeapTrimPolicy()
        for _ in 0..<10 {
            for count in 1...50 { small.connectionsChanged(to: count) }
            for count in stride(from: 49, through: 0, by: -1) { small.connectionsChanged(to: count) }
        }
        #expect(small.trims == 0)
    }

    /// A few connections holding much (a peer that grants no credit): the held bytes trigger a
    /// trim once they fall to half their peak and by at least `minimumBytesDrop`.
    @Test func trimsWhenHeldBytesHalve() {
        var policy = HeapTrimPolicy()
        let held = 5 * (16 << 20)
        for bytes in stride(from: 0, through: held, by: 1 << 20) { policy.heldBytesChanged(to: bytes) }
        policy.heldBytesChanged(to: held / 2 + 1)
        #expect(policy.trims == 0, "above half the peak: no trim")
        policy.heldBytesChanged(to: 0)
        #expect(policy.trims == 1)
        // Small amounts coming and going never trim.
        var small = HeapTrimPolicy()
        for _ in 0..<10 {
            small.heldBytesChanged(to: HeapTrimPolicy.minimumBytesDrop - 1)
            small.heldBytesChanged(to: 0)
        }
        #expect(small.trims == 0)
    }
}
