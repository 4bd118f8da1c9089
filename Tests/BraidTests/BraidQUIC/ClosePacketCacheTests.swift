import Testing
@testable import BraidQUIC

@Suite struct ClosePacketCacheTests {
    @Test func storedCloseIsDueOnce() {
        var cache = ClosePacketCache()
        #expect(!cache.isPending)
        cache.store([1, 2, 3])
        #expect(cache.isPending)
        #expect(cache.packet == [1, 2, 3])
        cache.markSent()
        #expect(!cache.isPending)
        #expect(cache.packet == [1, 2, 3], "kept for the answers to come")
    }

    @Test func arrivalsAreAnsweredOnPowersOfTwo() {
        var cache = ClosePacketCache()
        cache.store([9])
        cache.markSent()
        var answered: [Int] = []
        for arrival in 1...40 {
            cache.packetArrived()
            if cache.isPending {
                answered.append(arrival)
                cache.markSent()
            }
        }
        #expect(answered == [1, 2, 4, 8, 16, 32])
    }

    @Test func unsentAnswersDoNotPileUp() {
        var cache = ClosePacketCache()
        cache.store([9])
        // Nothing could be written meanwhile (no send slot): still one packet due, not three.
        for _ in 1...4 { cache.packetArrived() }
        #expect(cache.isPending)
        cache.markSent()
        #expect(!cache.isPending)
    }
}
