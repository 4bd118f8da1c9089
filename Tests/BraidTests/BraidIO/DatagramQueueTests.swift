import DequeModule
import Foundation
import Testing

@testable import Braid
@testable import BraidIO

/// The queues between datagram senders/readers and the connection's loop: the outbox `send`
/// appends to without a trip to the loop, and the inbox readers take batches from.
@Suite struct DatagramQueueTests {
    /// Only the first datagram of a burst asks for a loop pass; the rest ride along until the
    /// loop takes them. Sizes above the published limit, and any send before it is known, go
    /// to the loop; a full outbox makes senders wait until the loop takes some.
    /// A reader that never reads cannot make the inbox grow past its backlog, whether the
    /// datagrams come one by one or a socket read at a time: the oldest are dropped, the newest
    /// kept in order.
    @Test func theInboxKeepsAtMostItsBacklogDroppingTheOldest() async throws {
        let inbox = MessageInbox<Int>(backlog: 4)
        for value in 0..<10 { inbox.deliver(value) }
        #expect(inbox.count == 4)
        inbox.deliver(contentsOf: 10..<17)
        #expect(inbox.count == 4)
        #expect(Array(try await inbox.takeAll()) == [13, 14, 15, 16])
        inbox.deliver(contentsOf: 20..<22)
        inbox.putBack([17, 18, 19])
        #expect(Array(try await inbox.takeAll()) == [18, 19, 20, 21])
    }

    /// A socket read's deque handed over whole or appended: either way the inbox keeps its
    /// backlog, the newest in order, and the caller's deque comes back empty; a reader's deque
    /// swapped in is refilled with what arrives next, and nothing is delivered once finished.
    @Test func deliveriesByDequeKeepOrderAndBacklog() async throws {
        let inbox = MessageInbox<Int>(backlog: 4)
        var read = Deque([1, 2, 3])
        inbox.deliver(moving: &read)
        #expect(read.isEmpty)
        read.append(contentsOf: [4, 5, 6])
        inbox.deliver(moving: &read)
        #expect(read.isEmpty)
        var items = Deque([99])
        try await inbox.takeAll(swappingWith: &items)
        #expect(Array(items) == [3, 4, 5, 6])
        #expect(inbox.count == 0)
        read.append(contentsOf: 7..<13)
        inbox.deliver(moving: &read)
        try await inbox.takeAll(swappingWith: &items)
        #expect(Array(items) == [9, 10, 11, 12])
        #expect(inbox.droppedCount == 4)
        inbox.finish()
        read.append(13)
        inbox.deliver(moving: &read)
        #expect(read.isEmpty && inbox.count == 0)
        try await inbox.takeAll(swappingWith: &items)
        #expect(items.isEmpty)
    }

    @Test func theOutboxAsksForOneLoopPassPerBurst() async throws {
        let outbox = DatagramOutbox(limit: 3)
        #expect(outbox.offer(Data(count: 10)) == .needsLoop)
        outbox.publish(maximumSize: 100)
        #expect(outbox.offer(Data(count: 101)) == .needsLoop)
        #expect(outbox.offer(Data([1])) == .queuedDrainNeeded)
        #expect(outbox.offer(Data([2])) == .queued)
        #expect(outbox.offer(Data([3])) == .queued)
        #expect(outbox.offer(Data([4])) == .full)

        let waiter = Task { try await outbox.waitForRoom() }
        while outbox.roomWaiterCount == 0 { await Task.yield() }
        var taken = Deque<Data>()
        outbox.take(upTo: 1, into: &taken)
        #expect(Array(taken) == [Data([1])])
        #expect(outbox.heldBytes == 2)
        try await waiter.value
        // Datagrams remain: the loop keeps them in mind, so no new pass is asked for.
        #expect(outbox.offer(Data([4])) == .queued)
        outbox.take(upTo: 10, into: &taken)
        #expect(Array(taken) == [Data([2]), Data([3]), Data([4])])
        #expect(outbox.heldBytes == 0)
        #expect(outbox.offer(Data([5])) == .queuedDrainNeeded)
    }

    /// The loop's pass takes the whole queue by swapping deques: in order, the senders
    /// waiting for room woken, the next send asking for a new pass, and the deque handed in
    /// emptied first.
    @Test func theOutboxHandsItsWholeQueueOverBySwapping() async throws {
        let outbox = DatagramOutbox(limit: 2)
        outbox.publish(maximumSize: 100)
        #expect(outbox.offer(Data([1])) == .queuedDrainNeeded)
        #expect(outbox.offer(Data([2])) == .queued)
        #expect(outbox.offer(Data([3])) == .full)
        let waiter = Task { try await outbox.waitForRoom() }
        while outbox.roomWaiterCount == 0 { await Task.yield() }
        var taken: Deque<Data> = [Data([9])]
        outbox.take(upTo: .max, into: &taken)
        #expect(Array(taken) == [Data([1]), Data([2])])
        #expect(outbox.count == 0)
        #expect(outbox.heldBytes == 0)
        try await waiter.value
        #expect(outbox.offer(Data([3])) == .queuedDrainNeeded)
        outbox.take(upTo: .max, into: &taken)
        #expect(Array(taken) == [Data([3])])
        // Nothing queued: nothing taken, and the next send still asks for a pass.
        outbox.take(upTo: .max, into: &taken)
        #expect(taken.isEmpty)
        #expect(outbox.offer(Data([4])) == .queuedDrainNeeded)
    }

    /// The loop's drain into a deque it keeps: everything queued moves in one swap, a partial
    /// take keeps the rest in order, the deque is emptied first, and senders waiting for room
    /// are woken either way.
    @Test func theOutboxDrainsIntoTheLoopsDequeInOrder() async throws {
        let outbox = DatagramOutbox(limit: 3)
        outbox.publish(maximumSize: 100)
        for value in 1...3 { _ = outbox.offer(Data([UInt8(value)])) }
        let waiter = Task { try await outbox.waitForRoom() }
        while outbox.roomWaiterCount == 0 { await Task.yield() }
        var taken = Deque([Data([99])])
        outbox.take(upTo: 2, into: &taken)
        #expect(Array(taken) == [Data([1]), Data([2])])
        try await waiter.value
        #expect(outbox.offer(Data([4])) == .queued)
        outbox.take(upTo: 10, into: &taken)
        #expect(Array(taken) == [Data([3]), Data([4])])
        #expect(outbox.count == 0)
        #expect(outbox.offer(Data([5])) == .queuedDrainNeeded)
    }

    /// Once the connection ends, queued datagrams are dropped and every sender, waiting or
    /// new, gets the connection's error.
    @Test func aFailedOutboxFailsWaitingAndNewSenders() async throws {
        let outbox = DatagramOutbox(limit: 1)
        outbox.publish(maximumSize: 100)
        #expect(outbox.offer(Data([1])) == .queuedDrainNeeded)
        let waiter = Task { try await outbox.waitForRoom() }
        while outbox.roomWaiterCount == 0 { await Task.yield() }
        outbox.fail(NetworkError.peerReset)
        await #expect(throws: NetworkError.peerReset) { try await waiter.value }
        #expect(outbox.offer(Data([2])) == .failed(NetworkError.peerReset))
        #expect(outbox.count == 0)
    }
}

extension DatagramOutbox.Offer: Equatable {
    public static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.queued, .queued), (.queuedDrainNeeded, .queuedDrainNeeded), (.full, .full), (.needsLoop, .needsLoop): true
        case (.failed(let x), .failed(let y)): NetworkError(x) == NetworkError(y)
        default: false
        }
    }
}
