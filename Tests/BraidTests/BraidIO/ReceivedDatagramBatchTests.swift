import BraidCore
import Foundation
import Testing

@testable import BraidIO

/// The received datagrams' shared blocks: each datagram still arrives whole, in order, as a
/// `Data` of its own bytes starting at index 0, whatever the blocks it shares and however long
/// it outlives the others.
@Suite struct ReceivedDatagramBatchTests {
    private let metadata = DatagramMetadata(
        remote: SocketAddress(ip: "192.0.2.1", port: 4000)!, local: SocketAddress(ip: "192.0.2.2", port: 5000)!)

    /// A datagram of `count` bytes numbered `index`, each byte distinct from its neighbours'.
    private func datagram(_ index: Int, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) }
    }

    private func append(_ bytes: [UInt8], to batch: inout ReceivedDatagramBatch, ecn: ECN = .notECT) {
        var metadata = metadata
        metadata.ecn = ecn
        bytes.withUnsafeBytes { batch.append($0, metadata: metadata) }
    }

    /// More datagrams than one block holds, of sizes that do not divide it, an empty one, one
    /// larger than a block and a small one (stored inline by `Data`): all arrive as sent.
    @Test func datagramsArriveWholeAndInOrderAcrossBlocks() async throws {
        let inbox = MessageInbox<ReceivedDatagram>(backlog: 1000)
        var batch = ReceivedDatagramBatch()
        var sent: [[UInt8]] = []
        for index in 0..<120 { sent.append(datagram(index, count: 1200 + index % 7)) }
        sent.append([])
        sent.append(datagram(500, count: ReceivedDatagramBatch.blockBytes + 10))
        sent.append(datagram(501, count: 5))
        for (index, bytes) in sent.enumerated() { append(bytes, to: &batch, ecn: index == 3 ? .congestionExperienced : .notECT) }
        #expect(!batch.isEmpty)
        batch.deliver(to: inbox)
        #expect(batch.isEmpty)
        let received = Array(try await inbox.takeAll())
        #expect(received.count == sent.count)
        for (index, datagram) in received.enumerated() {
            #expect(datagram.content.startIndex == 0)
            #expect(datagram.content.count == sent[index].count)
            #expect(Array(datagram.content) == sent[index], "datagram \(index)")
            #expect(datagram.metadata.ecn == (index == 3 ? .congestionExperienced : .notECT))
            #expect(datagram.metadata.remote == metadata.remote)
        }
    }

    /// A datagram kept after every other of its block is gone still holds its bytes; the
    /// batch goes on filling new blocks meanwhile.
    @Test func aKeptDatagramOutlivesItsBlockmates() async throws {
        let inbox = MessageInbox<ReceivedDatagram>(backlog: 1000)
        var batch = ReceivedDatagramBatch()
        for index in 0..<10 { append(datagram(index, count: 1000), to: &batch) }
        batch.deliver(to: inbox)
        var taken = Array(try await inbox.takeAll())
        let kept = taken[4].content
        taken.removeAll()
        for index in 10..<20 { append(datagram(index, count: 1000), to: &batch) }
        batch.deliver(to: inbox)
        let later = Array(try await inbox.takeAll())
        #expect(Array(kept) == datagram(4, count: 1000))
        #expect(later.map { Array($0.content) } == (10..<20).map { datagram($0, count: 1000) })
    }

    /// A datagram changed by the application gets bytes of its own (its block's are let go
    /// then); its blockmates, one kept alone afterwards, keep theirs.
    @Test func aChangedDatagramLeavesItsBlockmatesIntact() async throws {
        let inbox = MessageInbox<ReceivedDatagram>(backlog: 1000)
        var batch = ReceivedDatagramBatch()
        for index in 0..<3 { append(datagram(index, count: 700), to: &batch) }
        append([], to: &batch)
        append(datagram(3, count: 9), to: &batch)
        batch.deliver(to: inbox)
        var taken = Array(try await inbox.takeAll()).map(\.content)
        #expect(taken.map(\.count) == [700, 700, 700, 0, 9])
        taken[1].append(contentsOf: [1, 2, 3])
        taken[0][0] = 0xEE
        #expect(Array(taken[1]) == datagram(1, count: 700) + [1, 2, 3])
        #expect(taken[0].first == 0xEE && Array(taken[0].dropFirst()) == Array(datagram(0, count: 700).dropFirst()))
        let kept = taken[2]
        taken.removeAll()
        #expect(Array(kept) == datagram(2, count: 700))
        #expect(kept.startIndex == 0)
    }

    /// Whole blocks go back to the pool once their datagrams are released and carry later
    /// reads: each round's datagrams arrive as sent, and one kept from an earlier round keeps
    /// its bytes (its block is not reused while it lives).
    @Test func reusedBlocksCarryLaterReadsIntact() async throws {
        let inbox = MessageInbox<ReceivedDatagram>(backlog: 1000)
        var batch = ReceivedDatagramBatch()
        var kept: Data?
        for round in 0..<6 {
            // 60 datagrams of 1,000 bytes: a block more than half full, kept whole.
            let sent = (0..<60).map { datagram(round * 100 + $0, count: 1000) }
            for bytes in sent { append(bytes, to: &batch) }
            batch.deliver(to: inbox)
            let received = Array(try await inbox.takeAll()).map(\.content)
            #expect(received.map { Array($0) } == sent, "round \(round)")
            if round == 1 { kept = received[7] }
        }
        #expect(kept.map { Array($0) } == datagram(107, count: 1000))
    }

    /// A block at most half full is shrunk to its datagrams' bytes (a kept datagram holds no
    /// more than its read's); a fuller one stays whole, for the pool.
    @Test func onlyABlockAtMostHalfFullIsShrunk() {
        let sparse = ReceivedBytes(capacity: ReceivedDatagramBatch.blockBytes)
        sparse.seal(used: 100)
        #expect(sparse.capacity == 100)
        let full = ReceivedBytes(capacity: ReceivedDatagramBatch.blockBytes)
        full.seal(used: ReceivedDatagramBatch.blockBytes / 2 + 1)
        #expect(full.capacity == ReceivedDatagramBatch.blockBytes)
    }

    /// What was appended and not delivered when the channel ends goes nowhere.
    @Test func releaseDropsWhatWasNotDelivered() async throws {
        let inbox = MessageInbox<ReceivedDatagram>(backlog: 1000)
        var batch = ReceivedDatagramBatch()
        append(datagram(1, count: 100), to: &batch)
        batch.release()
        #expect(batch.isEmpty)
        batch.deliver(to: inbox)
        #expect(inbox.count == 0)
        append(datagram(2, count: 100), to: &batch)
        batch.deliver(to: inbox)
        #expect(Array(try await inbox.takeAll()).map { Array($0.content) } == [datagram(2, count: 100)])
    }
}
