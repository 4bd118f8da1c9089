import BraidCore
import Testing

/// The pool behind `StreamBytes`: size classes, reuse of given-back blocks, the bound.
@Suite(.serialized) struct StreamBlockPoolTests {
    @Test func sizeClassesArePowersOfTwoFrom16KiBTo1MiB() {
        #expect(StreamBlockPool.sizeClass(for: 16_383) == nil)
        #expect(StreamBlockPool.sizeClass(for: 16_384) == 14)
        #expect(StreamBlockPool.sizeClass(for: 16_385) == 15)
        #expect(StreamBlockPool.sizeClass(for: 65_536) == 16)
        #expect(StreamBlockPool.sizeClass(for: 1 << 20) == 20)
        #expect(StreamBlockPool.sizeClass(for: (1 << 20) + 1) == nil)
    }

    /// A freed send's block serves a later send of its class, bytes intact each time. (A
    /// class other tests hardly use: 257 to 512 KiB.)
    @Test func aFreedBlockServesALaterSendOfItsClass() {
        var first: [StreamBytes] = (0..<3).map { _ in StreamBytes(copying: [UInt8](repeating: 1, count: 400_000)) }
        #expect(first.allSatisfy { $0.base.allSatisfy { $0 == 1 } })
        let addresses = Set(first.map { $0.base.baseAddress })
        first.removeAll()
        let second = (0..<3).map { _ in StreamBytes(copying: [UInt8](repeating: 2, count: 300_000)) }
        #expect(second.contains { addresses.contains($0.base.baseAddress) })
        #expect(second.allSatisfy { $0.count == 300_000 && $0.base.allSatisfy { $0 == 2 } })
    }

    /// However many sends are freed at once, the pool keeps a bounded number of blocks.
    @Test func thePoolKeepsABoundedNumberOfBlocks() {
        var many: [StreamBytes] = []
        for _ in 0..<50 { many.append(StreamBytes(copying: [UInt8](repeating: 3, count: 65_536))) }
        many.removeAll()
        let classes = StreamBlockPool.largestClass - StreamBlockPool.smallestClass + 1
        #expect(StreamBlockPool.keptBlocks <= StreamBlockPool.blocksPerClass * classes)
    }
}
