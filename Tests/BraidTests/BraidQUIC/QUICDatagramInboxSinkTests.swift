import BraidIO
import Foundation
import Testing

@testable import BraidQUICIO

/// A QUIC channel's datagram sink copies received datagrams into blocks shared by a receive
/// batch: each still reaches the reader whole, in order, as a `Data` of its own bytes from
/// index 0, however many blocks a batch fills and however long one datagram outlives the others.
@Suite struct QUICDatagramInboxSinkTests {
    /// A datagram of `count` bytes numbered `index`, each byte distinct from its neighbours'.
    private func datagram(_ index: Int, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) }
    }

    private func receive(_ bytes: [UInt8], into sink: QUICDatagramInboxSink) {
        bytes.withUnsafeBytes { sink.receive($0, early: false) }
    }

    /// More datagrams than one block holds, of sizes that do not divide it, an empty one
    /// between them, one larger than a block and a small one (stored inline by `Data`).
    @Test func datagramsArriveWholeAndInOrderAcrossBlocks() async throws {
        let sink = QUICDatagramInboxSink(inbox: DatagramInbox(backlog: 1000))
        var sent: [[UInt8]] = []
        for index in 0..<60 { sent.append(datagram(index, count: 1150 + index % 7)) }
        sent.append([])
        for index in 60..<120 { sent.append(datagram(index, count: 1150 + index % 5)) }
        sent.append(datagram(500, count: ReceivedBytes.blockBytes + 10))
        sent.append(datagram(501, count: 5))
        for bytes in sent { receive(bytes, into: sink) }
        sink.deliver()
        let received = Array(try await sink.inbox.takeAll())
        #expect(received.count == sent.count)
        for (index, datagram) in received.enumerated() {
            #expect(datagram.startIndex == 0)
            #expect(Array(datagram) == sent[index], "datagram \(index)")
        }
    }

    /// A datagram kept after the rest of its batch is gone keeps its bytes, a changed one gets
    /// bytes of its own without touching its batchmates, and later batches fill new blocks.
    @Test func aKeptOrChangedDatagramLeavesTheOthersIntact() async throws {
        let sink = QUICDatagramInboxSink(inbox: DatagramInbox(backlog: 1000))
        for index in 0..<10 { receive(datagram(index, count: 1000), into: sink) }
        sink.deliver()
        var taken = Array(try await sink.inbox.takeAll())
        let kept = taken[4]
        taken[2][0] = 0xEE
        #expect(Array(taken[3]) == datagram(3, count: 1000))
        taken.removeAll()
        for index in 10..<20 { receive(datagram(index, count: 1000), into: sink) }
        sink.deliver()
        let later = Array(try await sink.inbox.takeAll())
        #expect(Array(kept) == datagram(4, count: 1000))
        #expect(later.map { Array($0) } == (10..<20).map { datagram($0, count: 1000) })
    }
}
