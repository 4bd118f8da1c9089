import BraidQUIC
import Foundation
import Testing

@testable import Braid
@testable import BraidIO
import BraidCore

/// The queues between a stream's callers and its loop: the inbox receives take bytes from
/// without a trip to the loop, and the outbox sends queue into. Driven here by hand, as the
/// loop drives them.
@Suite struct StreamQueueTests {
    private func fill(_ inbox: StreamInbox, _ bytes: [UInt8], end: StreamInbox.End? = nil) {
        inbox.fill { sink in
            bytes.withUnsafeBytes { sink($0) }
            return end
        }
    }

    private func request(_ minimum: Int, _ maximum: Int, exact: Bool = false) -> StreamInbox.Request {
        StreamInbox.Request(minimum: minimum, maximum: maximum, exact: exact)
    }

    /// Queued bytes are handed out at once, in order, each receive taking up to its maximum;
    /// the end of stream rides on the receive that takes the last byte.
    @Test func receivesTakeQueuedBytesInOrder() async throws {
        let inbox = StreamInbox()
        fill(inbox, [1, 2, 3, 4, 5], end: .finished)
        let first = try await inbox.receive(request(1, 2)) {}
        #expect(first.content == Data([1, 2]) && !first.endOfStream)
        let second = try await inbox.receive(request(1, 10)) {}
        #expect(second.content == Data([3, 4, 5]) && second.endOfStream)
        let after = try await inbox.receive(request(1, 10)) {}
        #expect(after.content.isEmpty && after.endOfStream)
        // The content is an ordinary Data indexed from 0, whatever part of the buffer it was.
        #expect(second.content.startIndex == 0)
    }

    /// Bytes read in small pieces come out in order across the inbox's chunks (`fill(from:)`
    /// starts a new one as each fills) and across later fills.
    @Test(.timeLimit(.minutes(3))) func smallReceivesKeepOrderAcrossChunks() async throws {
        let inbox = StreamInbox()
        let total = 3 * StreamInbox.largestOwnChunk
        let pattern = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        fill(inbox, Array(pattern[..<(total / 2)]))
        var received = Data()
        var refilled = false
        while received.count < total {
            if !refilled && received.count >= total / 4 {
                fill(inbox, Array(pattern[(total / 2)...]))
                refilled = true
            }
            let piece = try await inbox.receive(request(1, 1000)) {}
            #expect(piece.content.startIndex == 0)
            received.append(piece.content)
        }
        #expect(received == Data(pattern))
    }

    /// Bytes a producer writes (a socket read) reach a large receive as the chunk's own memory,
    /// without a copy; a small receive gets a copy, so it does not keep the chunk alive.
    @Test func aLargeReceiveTakesTheWrittenMemoryWithoutACopy() async throws {
        let inbox = StreamInbox()
        var writer = InboxWriter(largestChunk: 256 * 1024)
        // Fill chunks (a page, then doubling) until the next one is 64 KiB.
        var filled = 0
        while true {
            let space = writer.space(minimum: 1)
            if space.count == 64 * 1024 { break }
            #expect(space.count == InboxWriter.smallestChunk << filled)
            writer.didWrite(space.count)
            filled += 1
        }
        inbox.fill(publishing: &writer)
        let before = inbox.available
        _ = try await inbox.receive(request(before, before, exact: true)) {}
        let space = writer.space(minimum: 1)
        for index in 0..<space.count { space[index] = UInt8(truncatingIfNeeded: index) }
        writer.didWrite(space.count)
        inbox.fill(publishing: &writer)

        let small = try await inbox.receive(request(100, 100, exact: true)) {}
        #expect(small.content.withUnsafeBytes { $0.baseAddress } != UnsafeRawPointer(space.baseAddress!))
        let large = try await inbox.receive(request(1, 1 << 20)) {}
        #expect(large.content.count == space.count - 100)
        #expect(large.content.withUnsafeBytes { $0.baseAddress } == UnsafeRawPointer(space.baseAddress! + 100))
        #expect(large.content.startIndex == 0)
        #expect(large.content.first == 100 && large.content.last == 0xFF)
    }

    /// A `Data` handed out without a copy keeps its chunk: after the inbox is gone and pooled
    /// chunks have been reused and overwritten, its bytes are unchanged.
    @Test func aZeroCopyReceiveOutlivesItsInbox() async throws {
        var kept: Data
        do {
            let inbox = StreamInbox()
            var writer = InboxWriter(largestChunk: StreamInbox.zeroCopyMinimum)
            let space = writer.space(minimum: StreamInbox.zeroCopyMinimum)
            for index in 0..<space.count { space[index] = 0xA5 }
            writer.didWrite(space.count)
            inbox.fill(publishing: &writer)
            kept = try await inbox.receive(request(1, space.count)) {}.content
        }
        for _ in 0..<(2 * StreamBlockPool.blocksPerClass) {
            var writer = InboxWriter(largestChunk: StreamInbox.zeroCopyMinimum)
            let space = writer.space(minimum: StreamInbox.zeroCopyMinimum)
            for index in 0..<space.count { space[index] = 0x5A }
        }
        #expect(kept.count == StreamInbox.zeroCopyMinimum)
        #expect(kept.allSatisfy { $0 == 0xA5 })
    }

    /// A writer released when its reader caught up takes a new chunk at the next write, of the
    /// size its filled chunks had reached; a release alone does not grow it. A first chunk is
    /// a page: a peer sending a few bytes on each of many streams makes each hold a page.
    @Test func aReleasedWriterTakesANewChunkOfTheSizeReached() {
        var writer = InboxWriter(largestChunk: 64 * 1024)
        let first = writer.space(minimum: 1)
        #expect(first.count == InboxWriter.smallestChunk)
        writer.didWrite(first.count)
        let second = writer.space(minimum: 1)
        #expect(second.count == 2 * InboxWriter.smallestChunk)
        writer.didWrite(10)
        writer.releaseChunk()
        let third = writer.space(minimum: 1)
        #expect(third.baseAddress != second.baseAddress! + 10)
        #expect(third.count == 2 * InboxWriter.smallestChunk)
        writer.releaseChunk()
        #expect(writer.space(minimum: 1).count == 2 * InboxWriter.smallestChunk)
    }

    /// A reservation (TLS: what it has buffered) makes the batch land in one chunk of that
    /// size, so a receive can take it whole without a copy; one that nothing is written
    /// under makes no chunk (an idle connection's handshake bytes hold no memory here).
    @Test func aReservationMakesOneChunkAtTheFirstWrite() async throws {
        let inbox = StreamInbox()
        var writer = InboxWriter(largestChunk: 256 * 1024)
        writer.reserve(100_000)
        inbox.fill(publishing: &writer)
        writer.reserve(70_000)
        let batch = pattern(seed: 5, count: 69_000)
        for start in stride(from: 0, to: batch.count, by: 16_384) {
            batch[start..<min(start + 16_384, batch.count)].withUnsafeBytes { writer.write($0) }
        }
        #expect(writer.space(minimum: 1).count == 1_000)
        inbox.fill(publishing: &writer)
        let whole = try await inbox.receive(request(1, 1 << 20)) {}
        #expect(whole.content == Data(batch))
    }

    /// Once the inbox has ended (a connection closing reads until the peer's FIN), what a
    /// producer writes is dropped at publication, not kept in the writer.
    @Test func anEndedInboxDropsWhatIsWrittenAfter() async throws {
        let inbox = StreamInbox()
        inbox.fail(NetworkError.cancelled)
        var writer = InboxWriter(largestChunk: 64 * 1024)
        let megabyte = [UInt8](repeating: 1, count: 1 << 20)
        megabyte.withUnsafeBytes { writer.write($0) }
        #expect(writer.hasUnpublished)
        inbox.fill(publishing: &writer)
        #expect(!writer.hasUnpublished)
        #expect(inbox.available == 0)
    }

    /// A producer that learns the end from its engine (a QUIC stream's owner) publishes the
    /// bytes written before the end, and is asked for the end only while the inbox has not
    /// ended; each publication hands back the credit consumed since the last. After the end,
    /// what it writes stays with it (for its owner to drop and credit), and it is not asked
    /// again.
    @Test func anEngineFedFillAsksForTheEndOnlyWhileTheInboxIsOpen() async throws {
        let inbox = StreamInbox()
        var writer = InboxWriter(largestChunk: 64 * 1024)
        let bytes = pattern(seed: 6, count: 40_000)
        bytes.withUnsafeBytes { writer.write($0) }
        var asked = 0
        var credit = inbox.fill(publishing: &writer) {
            asked += 1
            return nil
        }
        #expect(asked == 1 && inbox.available == 40_000 && !writer.hasUnpublished)
        #expect(credit == 0, "nothing was consumed")
        let first = try await inbox.receive(request(10_000, 10_000, exact: true)) {}
        credit = inbox.fill(publishing: &writer) {
            asked += 1
            return .finished
        }
        #expect(asked == 2 && inbox.hasEnded)
        #expect(credit == 10_000)
        [UInt8](repeating: 1, count: 1000).withUnsafeBytes { writer.write($0) }
        credit = inbox.fill(publishing: &writer) {
            asked += 1
            return nil
        }
        #expect(asked == 2, "asked an ended inbox's producer for its end")
        #expect(credit == 0)
        #expect(writer.hasUnpublished && inbox.available == 30_000)
        #expect(writer.discardUnpublished() == 1000)
        let rest = try await inbox.receive(request(30_000, 30_000, exact: true)) {}
        #expect(first.content + rest.content == Data(bytes) && rest.endOfStream)
    }

    /// A batch producer (a QUIC stream's sink) starts each batch at a chunk's beginning once the
    /// reader has read everything: its own chunk again when no receive holds any of it, a fresh
    /// one while a receive's `Data` still does. Mid-batch, or while bytes are unread, it writes
    /// on after what it wrote.
    @Test func aBatchStartsAtAChunksBeginningOnceTheReaderHasCaughtUp() async throws {
        let inbox = StreamInbox()
        var writer = InboxWriter(largestChunk: 64 * 1024)
        var asked = 0
        func write(_ count: Int, _ byte: UInt8) {
            [UInt8](repeating: byte, count: count).withUnsafeBytes {
                writer.write($0) {
                    asked += 1
                    return inbox.available == 0
                }
            }
        }
        // One chunk of 64 KiB, so every run below is large enough to go out without a copy.
        writer.reserve(64 * 1024)
        write(20_000, 1)
        let base = writer.space(minimum: 1).baseAddress! - 20_000
        write(100, 2)
        #expect(asked == 0, "asked the reader mid-batch")
        _ = inbox.fill(publishing: &writer) { nil }

        // Unread bytes: the next batch follows them.
        write(100, 3)
        #expect(asked == 1 && writer.space(minimum: 1).baseAddress == base + 20_200)
        _ = inbox.fill(publishing: &writer) { nil }

        // Read, the Data dropped: the chunk is written again from its start.
        do {
            let all = try await inbox.receive(request(20_200, 20_200, exact: true)) {}
            #expect(all.content.count == 20_200)
        }
        write(30_000, 4)
        #expect(writer.space(minimum: 1).baseAddress == base + 30_000)
        _ = inbox.fill(publishing: &writer) { nil }

        // Read and still held (a large run goes out without a copy): a fresh chunk.
        let held = try await inbox.receive(request(30_000, 30_000, exact: true)) {}
        write(100, 5)
        #expect(writer.space(minimum: 1).baseAddress != base + 100)
        #expect(held.content.allSatisfy { $0 == 4 }, "bytes a receive holds were written again")
        _ = inbox.fill(publishing: &writer) { nil }
        let last = try await inbox.receive(request(100, 100, exact: true)) {}
        #expect(last.content == Data(repeating: 5, count: 100))
    }

    /// Writes of every size, published at random points, come out in order through receives
    /// of every size, exact ones gathering across chunks; chunk sizes never exceed the largest.
    @Test(.timeLimit(.minutes(3))) func writtenBytesComeOutInOrderThroughAnyReceives() async throws {
        var generator = SystemRandomNumberGenerator()
        let inbox = StreamInbox()
        var writer = InboxWriter(largestChunk: 64 * 1024)
        let total = 1 << 20
        let pattern = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
        var written = 0
        var received = Data()
        while received.count < total {
            if written < total {
                let piece = min(total - written, Int.random(in: 1...40_000, using: &generator))
                if Bool.random(using: &generator) {
                    pattern[written..<written + piece].withUnsafeBytes { writer.write($0) }
                } else {
                    let space = writer.space(minimum: min(piece, 4096))
                    #expect(space.count <= 64 * 1024 || space.count == piece)
                    let count = min(piece, space.count)
                    pattern[written..<written + count].withUnsafeBytes { space.copyMemory(from: $0) }
                    writer.didWrite(count)
                    written += count - piece
                }
                written += piece
                if written == total || Int.random(in: 0..<3, using: &generator) == 0 { inbox.fill(publishing: &writer) }
            }
            guard inbox.available > 0 else { continue }
            let want = Int.random(in: 1...min(inbox.available, 100_000), using: &generator)
            let delivery = try await inbox.receive(request(want, want, exact: Bool.random(using: &generator))) {}
            #expect(delivery.content.count <= want && delivery.content.startIndex == 0)
            received.append(delivery.content)
        }
        #expect(received == Data(pattern))
    }

    /// A receive that needs more than is queued waits; its bytes come when the loop fills.
    /// The credit of the bytes it will take goes back at once (it may need more than the
    /// window holds); bytes nobody waits for keep theirs until they are consumed.
    @Test(.timeLimit(.minutes(3))) func aWaitingReceiveGetsItsCreditAheadOfTime() async throws {
        let inbox = StreamInbox()
        fill(inbox, Array(repeating: 7, count: 100))
        #expect(inbox.takeCredit() == 0, "nobody consumed or waits for these bytes")
        let asked = Locked(0)
        let receiving = Task { try await inbox.receive(request(300, 300, exact: true)) { asked.withLock { $0 += 1 } } }
        while inbox.waitingReceives == 0 { await Task.yield() }
        #expect(asked.withLock { $0 } == 1)
        #expect(inbox.takeCredit() == 100)
        fill(inbox, Array(repeating: 8, count: 150))
        #expect(inbox.takeCredit() == 150)
        fill(inbox, Array(repeating: 9, count: 60))
        let delivery = try await receiving.value
        #expect(delivery.content.count == 300)
        #expect(delivery.content.last == 9)
        // 50 of the last 60 bytes went to the receive; 10 stay unread and uncredited.
        #expect(inbox.takeCredit() == 50)
        #expect(inbox.available == 10)
    }

    /// A cancelled receive neither takes bytes nor holds back the receives after it.
    @Test(.timeLimit(.minutes(3))) func aCancelledReceiveLeavesTheBytesForTheNext() async throws {
        let inbox = StreamInbox()
        let cancelled = Task { try await inbox.receive(request(10, 10, exact: true)) {} }
        while inbox.waitingReceives == 0 { await Task.yield() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        fill(inbox, [1, 2, 3])
        let next = try await inbox.receive(request(1, 3)) {}
        #expect(next.content == Data([1, 2, 3]))
    }

    /// After a failure, queued bytes are still read, then receives throw; an exact receive
    /// that the end cuts short fails and leaves the bytes for a smaller one.
    @Test func aFailureComesAfterTheQueuedBytes() async throws {
        let inbox = StreamInbox()
        fill(inbox, [1, 2, 3], end: .failed(NetworkError.streamReset(code: 9)))
        await #expect(throws: NetworkError.streamReset(code: 9)) { try await inbox.receive(request(4, 4, exact: true)) {} }
        let rest = try await inbox.receive(request(1, 10)) {}
        #expect(rest.content == Data([1, 2, 3]) && !rest.endOfStream)
        await #expect(throws: NetworkError.streamReset(code: 9)) { try await inbox.receive(request(1, 10)) {} }
    }

    /// A stream that finished stays finished when a failure comes after its end (a peer's
    /// unidirectional stream is retired, and its inbox failed, once its FIN is read): the
    /// reader gets the bytes, then the end of the stream, never the failure.
    @Test func aFailureAfterTheEndKeepsTheEnd() async throws {
        let inbox = StreamInbox()
        fill(inbox, [1, 2], end: .finished)
        inbox.fail(NetworkError.invalidState("closed"))
        let rest = try await inbox.receive(request(1, 10)) {}
        #expect(rest.content == Data([1, 2]) && rest.endOfStream)
        let after = try await inbox.receive(request(1, 10)) {}
        #expect(after.content.isEmpty && after.endOfStream)
    }

    /// Consumed credit goes back in batches, or once the reader has caught up.
    @Test(.timeLimit(.minutes(3))) func consumedCreditIsClaimedInBatches() async throws {
        let inbox = StreamInbox()
        fill(inbox, Array(repeating: 1, count: StreamInbox.creditBatch + 200))
        _ = try await inbox.receive(request(1, 100)) {}
        #expect(!inbox.claimCreditPass(), "100 bytes consumed, more queued: not worth a pass yet")
        _ = try await inbox.receive(request(1, StreamInbox.creditBatch)) {}
        #expect(inbox.claimCreditPass())
        #expect(!inbox.claimCreditPass(), "one pass at a time")
        #expect(inbox.takeCredit() == StreamInbox.creditBatch + 100)
        _ = try await inbox.receive(request(1, 100)) {}
        #expect(inbox.available == 0)
        #expect(inbox.claimCreditPass(), "the reader caught up")
    }

    /// A length-prefixed message is taken whole, header and value in one go, even across the
    /// inbox's chunks; one not wholly here, or behind a waiting receive, is left alone, and
    /// so is one whose header the caller refuses.
    @Test(.timeLimit(.minutes(3))) func aWholeMessageIsTakenStraightFromTheInbox() async throws {
        let inbox = StreamInbox()
        let length: (UInt64) -> Int? = { header in header > 1000 ? nil : Int(header) }
        // Two-byte headers: a 3-byte message, then a 5-byte one split over two fills.
        fill(inbox, [0, 3, 7, 8, 9, 0, 5, 1, 2])
        guard case .message(let header, let value) = inbox.takeMessage(headerSize: 2, length: length) else {
            Issue.record("the first message is whole")
            return
        }
        #expect(header == 3 && value == Data([7, 8, 9]) && value.startIndex == 0)
        guard case .incomplete = inbox.takeMessage(headerSize: 2, length: length) else {
            Issue.record("the second message is not whole yet")
            return
        }
        #expect(inbox.available == 4, "nothing taken")
        fill(inbox, [3, 4, 5])
        guard case .message(let second, let rest) = inbox.takeMessage(headerSize: 2, length: length) else {
            Issue.record("the second message is whole now")
            return
        }
        #expect(second == 5 && rest == Data([1, 2, 3, 4, 5]))
        #expect(inbox.available == 0 && inbox.takeCredit() == 12, "the headers' bytes are consumed too")
        // Refused: nothing is taken, a receive still gets the bytes.
        fill(inbox, [0xFF, 0xFF, 1])
        guard case .refused = inbox.takeMessage(headerSize: 2, length: length) else {
            Issue.record("a header the caller refuses")
            return
        }
        let raw = try await inbox.receive(request(3, 3)) {}
        #expect(raw.content == Data([0xFF, 0xFF, 1]))
        // A waiting receive comes first: the message stays for it.
        let waiting = Task { try await inbox.receive(request(4, 4, exact: true)) {} }
        while inbox.waitingReceives == 0 { await Task.yield() }
        fill(inbox, [0, 1])
        guard case .incomplete = inbox.takeMessage(headerSize: 2, length: length) else {
            Issue.record("a receive is waiting")
            return
        }
        fill(inbox, [6, 0])
        #expect(try await waiting.value.content == Data([0, 1, 6, 0]))
    }

    private func bytes(_ count: Int) -> StreamBytes { StreamBytes(copying: [UInt8](repeating: 0, count: count)) }

    /// Sends that fit under the bound return at once; only the first of a burst asks for a
    /// loop pass. One that does not fit, one behind a waiting send, one larger than
    /// `maxQueuedSend`, or any before the stream may carry data, waits.
    @Test(.timeLimit(.minutes(3))) func theOutboxTakesSendsThatFitItsBound() async throws {
        let outbox = StreamOutbox(limit: 100, open: true)
        #expect(outbox.offer(bytes(60), endOfStream: false, idempotent: false) == .accepted(drainNeeded: true))
        #expect(outbox.offer(bytes(30), endOfStream: false, idempotent: false) == .accepted(drainNeeded: false))
        #expect(outbox.offer(bytes(30), endOfStream: false, idempotent: false) == .mustWait, "120 bytes would not fit in 100")
        #expect(outbox.offer(bytes(10), endOfStream: false, idempotent: false) == .accepted(drainNeeded: false))
        #expect(StreamOutbox(limit: 100, open: true).offer(bytes(101), endOfStream: false, idempotent: false) == .mustWait)
        let roomy = StreamOutbox(limit: 1 << 30, open: true)
        #expect(roomy.offer(bytes(StreamOutbox.maxQueuedSend + 1), endOfStream: false, idempotent: false) == .mustWait)
        #expect(roomy.offer(bytes(StreamOutbox.maxQueuedSend), endOfStream: false, idempotent: false) == .accepted(drainNeeded: true))
        #expect(StreamOutbox(limit: 100, open: false).offer(bytes(1), endOfStream: false, idempotent: false) == .mustWait)

        // The engine takes 50 bytes at a time; the waiting send completes once it has all of it.
        let waiting = Task {
            try await Completion<Void>.wait { completion in
                _ = outbox.enqueue(bytes(10), endOfStream: false, idempotent: false, completion: completion)
            }
        }
        while outbox.waitingSenders == 0 { await Task.yield() }
        #expect(outbox.offer(bytes(1), endOfStream: false, idempotent: false) == .mustWait, "behind a waiting send")
        // An engine that takes 50 bytes per pass: entries go in order, a pass stops at the
        // first entry it could not take whole, and the waiting send completes in the pass
        // that hands over its last byte.
        var handed: [[Int]] = []
        for _ in 0..<3 {
            var budget = 50
            var pass: [Int] = []
            outbox.drain { entry in
                let taken = min(entry.count - entry.offset, budget)
                budget -= taken
                pass.append(taken)
                return entry.offset + taken
            } unacknowledged: { 0 }
            handed.append(pass)
        }
        #expect(handed == [[50], [10, 30, 10, 0], [10]])
        try await waiting.value
        #expect(outbox.waitingSenders == 0)
        #expect(outbox.offer(bytes(1), endOfStream: true, idempotent: false) == .accepted(drainNeeded: true))
        #expect(outbox.offer(bytes(1), endOfStream: false, idempotent: false) == .failed(StreamBridgeError.notWritable), "after the end of stream")
    }

    /// Small sends copied into a shared block: a burst fills one block (one entry), a send
    /// after a drain (which took part of the block or all of it) starts a new block, a full
    /// block starts the next, and an own-bytes send between them keeps its place. Every byte
    /// comes out once, in order.
    @Test func smallSendsShareBlocksAndKeepTheirOrder() {
        let outbox = StreamOutbox(limit: 1 << 20, open: true)
        var sent: [UInt8] = []
        var next: UInt8 = 0
        func offerShared(_ count: Int) -> StreamOutbox.Offer {
            let values = (0..<count).map { _ -> UInt8 in
                next &+= 1
                return next
            }
            sent += values
            return outbox.offer(count: count, endOfStream: false) { buffer in values.withUnsafeBytes { buffer.copyMemory(from: $0) } }
        }
        var received: [UInt8] = []
        var entries: [(shared: Int, count: Int)] = []
        func drain(taking limit: Int = .max) {
            var budget = limit
            outbox.drain { entry in
                let taken = min(entry.count - entry.offset, budget)
                budget -= taken
                received += entry.withBytes(from: entry.offset) { Array($0.prefix(taken)) }
                entries.append((entry.bytes?.count ?? 0, entry.count))
                return entry.offset + taken
            } unacknowledged: { 0 }
        }
        #expect(offerShared(1000) == .accepted(drainNeeded: true))
        for _ in 0..<3 { #expect(offerShared(1000) == .accepted(drainNeeded: false)) }
        drain(taking: 2500)
        #expect(entries.map(\.count) == [4000], "one entry for the burst")
        #expect(offerShared(500) == .accepted(drainNeeded: false), "the rest of the first block is still queued")
        drain()
        #expect(entries.suffix(2).map(\.count) == [4000, 500], "the rest of the first block, then a new one")
        #expect(offerShared(10) == .accepted(drainNeeded: true))
        // Fill the second block to its 16 KiB, then one more starts a third.
        for _ in 0..<4 { #expect(offerShared(StreamOutbox.largestSharedSend) == .accepted(drainNeeded: false)) }
        let own = StreamBytes(copying: (0..<100).map { _ -> UInt8 in
            next &+= 1
            return next
        })
        sent += own.base
        #expect(outbox.offer(own, endOfStream: false, idempotent: false) == .accepted(drainNeeded: false))
        #expect(offerShared(3) == .accepted(drainNeeded: false))
        entries = []
        drain()
        #expect(entries.map(\.count) == [10 + 3 * StreamOutbox.largestSharedSend, StreamOutbox.largestSharedSend, 100, 3])
        #expect(entries.map(\.shared) == [16_384, 16_384, 100, 16_384])
        #expect(received == sent)
        #expect(outbox.isEmpty)
    }

    /// Borrowed sends (the caller's `Data`, array or array slice, not copied) come out through
    /// `withBytes` from any offset the engine reached, in order with copied ones, and an
    /// engine that keeps pointers (QUIC) cannot be handed one (`bytes` is nil).
    @Test func borrowedSendsComeOutInOrderFromAnyOffset() {
        let outbox = StreamOutbox(limit: 1 << 20, open: true)
        let data = Data((0..<40_000).map { UInt8(truncatingIfNeeded: $0) })
        let array = (0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 3) }
        let slice = array[1000..<21_000]
        #expect(outbox.offer(.borrowed(data), endOfStream: false, idempotent: false) == .accepted(drainNeeded: true))
        #expect(outbox.offer(bytes(100), endOfStream: false, idempotent: false) == .accepted(drainNeeded: false))
        #expect(outbox.offer(.borrowed(slice), endOfStream: true, idempotent: false) == .accepted(drainNeeded: false))
        var received: [UInt8] = [], borrowed: [Bool] = []
        while !outbox.isEmpty {
            outbox.drain { entry in
                // An engine that takes 7,000 bytes at a time.
                let taken = min(entry.count - entry.offset, 7000)
                received += entry.withBytes(from: entry.offset) { Array($0.prefix(taken)) }
                if entry.offset == 0 { borrowed.append(entry.bytes == nil) }
                return entry.offset + taken
            } unacknowledged: { 0 }
        }
        #expect(received == Array(data) + Array(repeating: 0, count: 100) + Array(slice))
        #expect(borrowed == [true, false, true])
    }

    /// Once the stream fails, waiting senders and new ones get the error.
    @Test(.timeLimit(.minutes(3))) func aFailedOutboxFailsWaitingAndNewSenders() async throws {
        let outbox = StreamOutbox(limit: 10, open: false)
        let waiting = Task {
            try await Completion<Void>.wait { completion in
                _ = outbox.enqueue(bytes(5), endOfStream: false, idempotent: false, completion: completion)
            }
        }
        while outbox.waitingSenders == 0 { await Task.yield() }
        outbox.fail(NetworkError.streamStopped(code: 3))
        await #expect(throws: NetworkError.streamStopped(code: 3)) { try await waiting.value }
        #expect(outbox.offer(bytes(1), endOfStream: false, idempotent: false) == .failed(NetworkError.streamStopped(code: 3)))
    }
}

extension StreamOutbox.Offer: Equatable {
    public static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.accepted(let x), .accepted(let y)): x == y
        case (.mustWait, .mustWait): true
        case (.failed(let x), .failed(let y)): NetworkError(x) == NetworkError(y)
        default: false
        }
    }
}
