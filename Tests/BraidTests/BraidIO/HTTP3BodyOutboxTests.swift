import BraidCore
import BraidHTTP3
import BraidHTTP3IO
import BraidIO
import Foundation
import Testing

/// The bounded queue between an HTTP/3 body's writer and the engine that pulls it.
@Suite struct HTTP3BodyOutboxTests {
    static func bytes(_ chunk: HTTP3BodyChunk) -> [UInt8]? {
        guard case .bytes(let stored, let range) = chunk else { return nil }
        return Array(UnsafeRawBufferPointer(rebasing: stored.base[range]))
    }

    /// Waits (without a deadline) until `condition` holds, yielding to other tasks.
    static func eventually(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
    }

    @Test func sendBeyondTheLimitWaitsUntilTheEnginePulls() async throws {
        let outbox = HTTP3BodyOutbox(limit: 1000) {}
        try await outbox.send(Data(repeating: 1, count: 1000))
        #expect(outbox.queuedBytes == 1000)
        let second = Task { try await outbox.send(Data(repeating: 2, count: 600)) }
        await Self.eventually { outbox.waitingSends == 1 }
        // Still at the limit: the second send holds its bytes, the queue has only the first.
        #expect(outbox.queuedBytes == 1000)
        #expect(Self.bytes(outbox.next()) == [UInt8](repeating: 1, count: 1000))
        try await second.value
        #expect(outbox.queuedBytes == 600)
        outbox.finish()
        #expect(Self.bytes(outbox.next()) == [UInt8](repeating: 2, count: 600))
        guard case .end(let trailers) = outbox.next() else {
            Issue.record("the body did not end after finish()")
            return
        }
        #expect(trailers.isEmpty)
    }

    @Test func anEmptyQueueIsPendingAndTheNextSendWakesTheEngine() async throws {
        let wakes = Locked(0)
        let outbox = HTTP3BodyOutbox(limit: 1000) { wakes.withLock { $0 += 1 } }
        guard case .pending = outbox.next() else {
            Issue.record("an empty queue gave something other than .pending")
            return
        }
        try await outbox.send(Data([7, 8, 9]))
        #expect(wakes.withLock { $0 } == 1)
        #expect(Self.bytes(outbox.next()) == [7, 8, 9])
        _ = outbox.next()
        outbox.finish()
        #expect(wakes.withLock { $0 } == 2)
    }

    @Test func failureEndsWaitingAndLaterSends() async throws {
        let outbox = HTTP3BodyOutbox(limit: 10) {}
        try await outbox.send(Data(repeating: 0, count: 10))
        let waiting = Task { try await outbox.send(Data(repeating: 1, count: 10)) }
        await Self.eventually { outbox.waitingSends == 1 }
        outbox.fail(CancellationError())
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await #expect(throws: CancellationError.self) { try await outbox.send(Data([1])) }
        #expect(outbox.queuedBytes == 0)
    }
}
