import BraidIO
import Foundation
import Testing

@testable import Braid

/// A framer over UDP (`Coder { UDP() }`, one value per datagram) under a peer whose values
/// its application never reads: the listener's buffer limit holds for the framer's
/// connections as it does for UDP's.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DatagramFramerListenerAttackTests {
    /// A peer sends 8 KiB values (JSON strings, one per datagram) that the application never
    /// reads; the listener's limit is 2 MiB. While the flood goes on another peer is echoed;
    /// the listener closes the flooding peer's connection (`serverBusy`) and is back under
    /// its limit, and a new peer is echoed after.
    @Test func coderOverUDPListenerClosesAPeerItsApplicationNeverReads() async throws {
        let limit = 2 << 20
        let busy = ManagedCounter()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { Coder(String.self, using: .json) { UDP() } }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                do {
                    let first = try await connection.receive().content
                    if first.hasPrefix("echo") {
                        try await connection.send(first)
                        while true { try await connection.send(try await connection.receive().content) }
                    }
                } catch NetworkError.serverBusy(_, _) {
                    busy.increment()
                    return
                }
                // Reads nothing more; waits for the connection's end.
                for await state in connection.states {
                    if case .failed(.serverBusy) = state { busy.increment() }
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let budget = try #require(listener.bufferBudget.withLock { $0 })
        func json(_ text: String) -> Data { Data("\"\(text)\"".utf8) }

        // A plain UDP peer sending the values' JSON, as fast as it goes, until the reader was
        // served and the listener closed the flooding peer at least once.
        let served = Locked(false)
        let hostile = NetworkConnection(to: endpoint) { UDP() }
        defer { hostile.cancel() }
        let payload = json(String(repeating: "z", count: 8 << 10))
        let flooding = Task {
            let deadline = ContinuousClock.now + .seconds(120)
            var sent = 0
            while !(served.withLock { $0 } && budget.closedConnections >= 1) && !Task.isCancelled && ContinuousClock.now < deadline {
                try await hostile.send(payload)
                sent += 1
                // The attacker's pace, not a wait for an event: 64 at a time.
                if sent % 64 == 0 { try await Task.sleep(for: .milliseconds(5)) }
            }
            return sent
        }
        defer { flooding.cancel() }
        // The flooding peer holds bytes, counted: another peer is served meanwhile.
        let holding = ContinuousClock.now + .seconds(90)
        while budget.buffered < limit / 4 && budget.closedConnections == 0 && ContinuousClock.now < holding {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(budget.peak >= limit / 4, "peak \(budget.peak)")
        let reader = NetworkConnection(to: endpoint) { UDP() }
        defer { reader.cancel() }
        #expect(try await udpEcho(json("echo me"), on: reader)?.content == json("echo me"))
        served.withLock { $0 = true }

        let sent = try await flooding.value
        let deadline = ContinuousClock.now + .seconds(90)
        while (budget.closedConnections == 0 || budget.buffered >= limit) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        while busy.value < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(busy.value >= 1)
        let after = NetworkConnection(to: endpoint) { UDP() }
        defer { after.cancel() }
        #expect(try await udpEcho(json("echo again"), on: after)?.content == json("echo again"))
        print("Coder over UDP, limit \(limit >> 20) MiB: \(sent) values of 8 KiB sent, budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections)")
    }
}
