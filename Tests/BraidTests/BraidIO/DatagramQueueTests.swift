import Foundation
import Synchronization
import Testing

@testable import Braid
@testable import BraidIO

/// The queues between datagram senders/readers and the connection's loop: the outbox `send`
/// appends to without a trip to the loop, and the inbox readers take batches from.
@Suite struct DatagramQueueTests {
    /// Only the first datagram of a burst asks for a loop pass; the rest ride along until the
    /// loop takes them. Sizes above the published limit, and any send before it is known, go
    /// to the loop; a full outbox makes senders wait until the loop takes some.
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
        #expect(outbox.take(upTo: 1) == [Data([1])])
        try await waiter.value
        // Datagrams remain: the loop keeps them in mind, so no new pass is asked for.
        #expect(outbox.offer(Data([4])) == .queued)
        #expect(outbox.take(upTo: 10) == [Data([2]), Data([3]), Data([4])])
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

    /// A reader that stops early (a `break` out of `for await`) took a whole batch; what it
    /// did not hand out goes back to the connection for the next reader, in order.
    @Test(.timeLimit(.minutes(1))) func datagramsAnIteratorTookButDidNotReturnAreKept() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        _ = try await connection.openStream()
        let sent = (0..<20).map { Data([UInt8($0), 1, 2, 3]) }
        for datagram in sent { try await connection.datagrams.send(datagram) }
        // All echoes queued, so the first reader's batch holds all of them.
        while connection.shared.datagramInbox.count < sent.count { try await Task.sleep(for: .milliseconds(5)) }
        var first: Data?
        for await datagram in connection.datagrams {
            first = datagram
            break
        }
        var rest: [Data] = []
        for await datagram in connection.datagrams {
            rest.append(datagram)
            if rest.count == sent.count - 1 { break }
        }
        #expect([first] + rest == sent)
    }

    /// Many tasks reading one connection's datagrams at once: each datagram reaches exactly one.
    @Test(.timeLimit(.minutes(1))) func concurrentReadersShareTheDatagrams() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        _ = try await connection.openStream()
        let total = 400
        let received = SharedNumbers()
        let readers = Task {
            await withDiscardingTaskGroup { group in
                for _ in 0..<4 {
                    group.addTask {
                        for await datagram in connection.datagrams {
                            let done = received.numbers.withLock {
                                $0.append(Int(datagram[0]) << 8 | Int(datagram[1]))
                                return $0.count >= total
                            }
                            if done { break }
                        }
                    }
                }
                // The first reader to see the last datagram ends; the others end with the connection.
                while received.numbers.withLock({ $0.count }) < total { try? await Task.sleep(for: .milliseconds(5)) }
                group.cancelAll()
            }
        }
        for number in 0..<total {
            try await connection.datagrams.send(Data([UInt8(number >> 8), UInt8(number & 0xFF)]))
            // Paced in small bursts so the 4,096-datagram inbox bound never drops any.
            if number % 50 == 49 { try await Task.sleep(for: .milliseconds(2)) }
        }
        await readers.value
        #expect(received.numbers.withLock { $0.sorted() } == Array(0..<total))
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

/// Numbers several tasks append to.
private final class SharedNumbers: Sendable {
    let numbers = Mutex<[Int]>([])
}
