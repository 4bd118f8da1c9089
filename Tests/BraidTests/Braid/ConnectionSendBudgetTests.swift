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
/// streams it sends on. In memory (`MemoryWorld`): the held bytes are sampled in virtual time.
@Suite struct ConnectionSendBudgetTests {
    static let budget = 256 * 1024

    /// The connection's send budget (the object its streams' sends are admitted by).
    static func budget(of connection: NetworkConnection<QUIC>) async throws -> SharedSendBudget {
        let core = connection.core
        return try await connection.loop.submit { _ in core.value.quic.sendBudget }
    }

    /// Sixteen perf downloads of 1 MiB from a listener whose connections may hold 256 KiB for
    /// sending (each stream alone could hold 1 MiB): every download arrives intact, and the
    /// listener's engines never hold more than the budget (sampled every millisecond of
    /// virtual time).
    @Test(.timeLimit(.minutes(10))) func streamsSharingTheBudgetAllFinishIntact() async throws {
        try await MemoryWorld.run { world in
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
                    try await world.sleep(for: .milliseconds(1))
                }
            }
            // A wedged download fails the test at the world's limit of virtual time.
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
                return try await group.reduce(into: []) { $0.append($1) }
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
    }

    /// A client sending 1 MiB pieces on eight streams to a listener that reads nothing: the
    /// sends stop at the budget (the peer's windows take far more than it), the connection's
    /// streams hold at most the budget plus one send, and the waiting sends fail with the
    /// connection when it is cancelled.
    @Test(.timeLimit(.minutes(10))) func aSenderHoldsAtMostTheBudgetPlusOneSend() async throws {
        try await MemoryWorld.run { world in
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
            // Sampled every 25 ms of virtual time until the held bytes stop changing for a
            // second of it (or 60 s have passed).
            var samples: [Int] = []
            var unchanged = 0
            for _ in 0..<2400 where unchanged < 40 {
                try await world.sleep(for: .milliseconds(25))
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
    }

    /// One stream's send fills the budget toward a peer that reads nothing; another stream's
    /// send waits for room, and gets it (and completes) once the first stream is reset.
    @Test(.timeLimit(.minutes(10))) func resettingAStreamGivesItsRoomToAWaitingSender() async throws {
        try await MemoryWorld.run { world in
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
            _ = try await world.eventually { budget.held >= Self.budget }
            #expect(budget.held >= Self.budget, "the first stream never filled the budget: \(budget.held)")
            let waiting = Task { try await waiter.send(Data(count: 1000)) }
            _ = try await world.eventually { budget.waitingSenders > 0 }
            #expect(budget.waitingSenders == 1, "the second stream's send did not wait for the budget")

            try await filler.reset(streamApplicationErrorCode: 5)
            await #expect(throws: NetworkError.self) { try await filling.value }
            // The reset's room reaches the waiting send (a wedge fails the test at the world's
            // limit of virtual time).
            try await waiting.value
            #expect(budget.waitingSenders == 0)
        }
    }
}

/// A number tasks update together.
private final class Tally: Sendable {
    private let number = Locked(0)
    func add(_ amount: Int) { number.withLock { $0 += amount } }
    func raise(to candidate: Int) { number.withLock { $0 = max($0, candidate) } }
    var value: Int { number.withLock { $0 } }
}
