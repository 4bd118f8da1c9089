import BraidCore
import BraidIO
import BraidPerf
import BraidQUICIO
import Foundation
import Testing

@testable import Braid

/// `QUIC.connectionSendBufferLimit` through the public API: streams that share a small budget
/// all finish intact (waiting senders are woken as acknowledgements free room), and a sender
/// toward a peer that reads nothing holds at most the budget plus one send, however many
/// streams it sends on.
@Suite(.serialized) struct ConnectionSendBudgetTests {
    static let budget = 256 * 1024

    /// The connection's send budget (the object its streams' sends are admitted by).
    static func budget(of connection: NetworkConnection<QUIC>) async throws -> SendBudget {
        let core = connection.core
        return try await connection.loop.submit { _ in core.value.quic.sendBudget }
    }

    /// Sixteen perf downloads of 1 MiB from a listener whose connections may hold 256 KiB for
    /// sending (each stream alone could hold 1 MiB): every download arrives intact, and the
    /// listener's engines never hold more than the budget.
    @Test func streamsSharingTheBudgetAllFinishIntact() async throws {
        let server = try await RunningListener.start(
            alpn: ["perf"], configure: { $0.connectionSendBufferLimit(Self.budget) },
            handler: { connection in try await PerfService.serve(connection) })
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient(alpn: ["perf"]) }
        defer { connection.cancel() }
        let size = 1024 * 1024
        let mostHeld = Tally()
        let watching = Task {
            while !Task.isCancelled {
                if let now = await server.listener.statistics { mostHeld.raise(to: now.bufferedBytes) }
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
        let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let stream = try await connection.openStream()
                    try await stream.send(UInt64(size))
                    try await stream.send(Data(), endOfStream: true)
                    let (count, intact) = try await PerfService.receivePattern(from: stream)
                    return (count, intact)
                }
            }
            // A wedged wait fails the test instead of hanging it.
            group.addTask {
                try await Task.sleep(for: .seconds(120))
                throw InteropFailure("the downloads did not finish within 120 s")
            }
            var results: [(Int, Bool)] = []
            while results.count < 16, let result = try await group.next() { results.append(result) }
            group.cancelAll()
            return results
        }
        watching.cancel()
        #expect(results.count == 16)
        #expect(results.allSatisfy { $0.0 == size && $0.1 }, "\(results)")
        // Received, unread bytes count too (each request is 8 bytes).
        let held = mostHeld.value
        #expect(held <= Self.budget + 16 * 8, "the listener held \(held) bytes, budget \(Self.budget)")
        // The budget bound (sixteen streams could have held 16 MiB): here it fills at once.
        #expect(held >= Self.budget / 2, "the listener held only \(held) bytes: the budget never bound")
    }

    /// A client sending 1 MiB pieces on eight streams to a listener that reads nothing: the
    /// sends stop at the budget (the peer's windows take far more than it), the connection's
    /// streams hold at most the budget plus one send, and the waiting sends fail with the
    /// connection when it is cancelled.
    @Test func aSenderHoldsAtMostTheBudgetPlusOneSend() async throws {
        let server = try await RunningListener.start(handler: readNothing)
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            testClient().connectionSendBufferLimit(Self.budget).streamSendBufferLimit(1024 * 1024)
        }
        defer { connection.cancel() }
        let piece = 1024 * 1024
        let sent = Tally()
        let senders = (0..<8).map { _ in
            Task {
                let stream = try await connection.openStream()
                for _ in 0..<16 {
                    try await stream.send(Data(count: piece))
                    sent.add(piece)
                }
            }
        }
        let budget = try await Self.budget(of: connection)
        // Sampled until the held bytes stop changing (a bounded wait, nothing timed).
        var samples: [Int] = []
        var unchanged = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while unchanged < 40, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(25))
            let held = budget.held
            unchanged = held == samples.last && held > 0 ? unchanged + 1 : 0
            samples.append(held)
        }
        #expect(unchanged >= 40, "the held bytes never settled: \(samples.suffix(5))")
        let most = samples.max() ?? 0
        #expect(most <= Self.budget + piece, "held \(most) bytes, budget \(Self.budget) plus one send of \(piece)")
        #expect(most >= Self.budget / 2, "held only \(most) bytes: the budget never filled")
        #expect(budget.waitingSenders > 0, "no sender waits for the budget")
        // Eight senders offered 128 MiB; the peer's windows alone would have taken 4 MiB.
        #expect(sent.value <= Self.budget + 8 * piece, "\(sent.value) bytes sent")
        connection.cancel()
        for sender in senders {
            await #expect(throws: NetworkError.self) { try await sender.value }
        }
    }

    /// One stream's send fills the budget toward a peer that reads nothing; another stream's
    /// send waits for room, and gets it (and completes) once the first stream is reset.
    @Test func resettingAStreamGivesItsRoomToAWaitingSender() async throws {
        let server = try await RunningListener.start(handler: readNothing)
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            testClient().connectionSendBufferLimit(Self.budget).streamSendBufferLimit(1024 * 1024)
        }
        defer { connection.cancel() }
        let budget = try await Self.budget(of: connection)
        let filler = try await connection.openStream()
        let filling = Task { try await filler.send(Data(count: 4 * 1024 * 1024)) }
        let waiter = try await connection.openStream()
        let deadline = ContinuousClock.now + .seconds(30)
        while budget.held < Self.budget, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(budget.held >= Self.budget, "the first stream never filled the budget: \(budget.held)")
        let waiting = Task { try await waiter.send(Data(count: 1000)) }
        while budget.waitingSenders == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(budget.waitingSenders == 1, "the second stream's send did not wait for the budget")

        try await filler.reset(streamApplicationErrorCode: 5)
        await #expect(throws: NetworkError.self) { try await filling.value }
        // The reset's room reaches the waiting send (a bounded wait: a wedge fails the test).
        let finished = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { try await waiting.value; return true }
                group.addTask { try await Task.sleep(for: .seconds(30)); return false }
                let first = try await group.next() ?? false
                if !first { waiting.cancel() }
                group.cancelAll()
                return first
            }
        }
        #expect(try await finished.value, "the waiting send never got the reset stream's room")
        #expect(budget.waitingSenders == 0)
    }
}

/// A number tasks update together.
private final class Tally: Sendable {
    private let number = Locked(0)
    func add(_ amount: Int) { number.withLock { $0 += amount } }
    func raise(to candidate: Int) { number.withLock { $0 = max($0, candidate) } }
    var value: Int { number.withLock { $0 } }
}
