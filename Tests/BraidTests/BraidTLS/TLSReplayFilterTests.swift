import Testing

@testable import BraidTLS

/// The 0-RTT replay filter refuses a replay, forgets expired entries, and never holds more than
/// its capacity, however fast resumption attempts come.
@Suite struct TLSReplayFilterTests {
    private func key(_ index: Int) -> [UInt8] { withUnsafeBytes(of: index) { Array($0) } }

    @Test func refusesReplaysUntilTheyExpire() {
        let filter = TLSReplayFilter()
        #expect(filter.insert(key: [1], expiry: 110, now: 100))
        #expect(!filter.insert(key: [1], expiry: 111, now: 101))
        #expect(filter.insert(key: [1], expiry: 120, now: 110), "expired: seen again it is new")
    }

    @Test func aFloodOfAttemptsStaysWithinTheCapacity() {
        let filter = TLSReplayFilter()
        let capacity = TLSReplayFilter.capacity
        // Within one second (one sweep at most), all unexpired: the filter fills, then refuses.
        let accepted = (0..<capacity).filter { filter.insert(key: key($0), expiry: 200, now: 100) }.count
        #expect(accepted == capacity)
        #expect(filter.count == capacity)
        #expect(!filter.insert(key: key(capacity), expiry: 200, now: 100), "a full filter refuses early data")
        #expect(filter.count == capacity)
        // Once they expire the next insert sweeps them and is accepted.
        #expect(filter.insert(key: key(capacity + 1), expiry: 400, now: 300))
        #expect(filter.count == 1)
    }
}
