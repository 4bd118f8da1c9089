import BraidIO
import BraidQUIC
import Testing

/// The event loop on its own.
@Suite struct EventLoopTests {
    /// A timer set absurdly far ahead (as an engine deadline computed from a wrapped RTT sample
    /// once was) leaves the loop waiting for other work; the timeout conversion used to trap.
    @Test func aTimerBeyondInt64NanosecondsIsJustLate() async throws {
        let loop = try EventLoop(name: "test-far-timer")
        defer { loop.shutdown() }
        _ = try await loop.submit { context in
            context.schedule(at: QUICInstant(nanoseconds: UInt64.max - 1)) { _ in }
        }
        // The loop waits with that timer armed and still runs posted work.
        try await Task.sleep(for: .milliseconds(20))
        let answer = try await loop.submit { _ in 42 }
        #expect(answer == 42)
    }
}
