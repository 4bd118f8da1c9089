import BraidIO
import BraidPerf
import Foundation
import Testing

@testable import Braid

/// `NetworkListener.connectionBufferLimit` over loopback: peers that never read make a
/// listener's connections hold what its application sends them; with several such peers the
/// listener holds more than its limit allows for at most a sweep or two, closes the stalled
/// holders, largest first, until it is back under the limit, and serves a new client after.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ListenerBufferBudgetTests {
    /// What a listener's handler saw, from any task.
    private final class Outcomes: Sendable {
        private let ended = Locked<[NetworkError]>([])
        func add(_ error: NetworkError) { ended.withLock { $0.append(error) } }
        var serverBusy: Int {
            ended.withLock { $0.filter { if case .serverBusy = $0 { true } else { false } }.count }
        }
    }

    /// Waits (generously) until the listener's budget shows `condition`.
    private func waitForBudget(
        _ listener: NetworkListener<some NetworkProtocol>, _ condition: (ListenerBufferBudget) -> Bool
    ) async throws -> ListenerBufferBudget {
        let budget = try #require(listener.bufferBudget.withLock { $0 })
        let deadline = ContinuousClock.now + .seconds(90)
        while !condition(budget) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        return budget
    }

    /// What a new TCP client gets echoed once the listener serves it: connections it did not
    /// close can still grow back to the limit for a moment (their outboxes were filling), and a
    /// client that arrives then is reset; it connects again once the listener is back under the
    /// limit, until a generous deadline.
    private func echoOnceServed(at endpoint: NWEndpoint, listener: NetworkListener<TCP>, limit: Int) async throws -> Data {
        let deadline = ContinuousClock.now + .seconds(90)
        while true {
            let reader = NetworkConnection(to: endpoint) { TCP() }
            defer { reader.cancel() }
            do {
                try await reader.send(Data("echo me".utf8))
                return try await reader.receive(exactly: 7).content
            } catch let error as NetworkError where ContinuousClock.now < deadline {
                let budget = try await waitForBudget(listener) { $0.buffered < limit }
                #expect(budget.refusedConnections >= 1, "reset while not refused: \(error)")
            }
        }
    }

    /// Three QUIC clients ask for 32 MiB on each of twenty streams they never read (the
    /// listener's connections hold up to their 16 MiB send budget each, 48 MiB together); the listener's
    /// limit is 24 MiB, so it closes stalled connections until under it, and a client that
    /// reads is echoed after.
    @Test func quicListenerClosesStalledHoldersToStayWithinItsLimit() async throws {
        let limit = 24 << 20
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer()
        }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                do {
                    try await connection.inboundStreams { stream in
                        let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
                        if request.first == UInt8(ascii: "e") {
                            try await stream.send(request, endOfStream: true)
                            return
                        }
                        let chunk = Data(repeating: 0x5A, count: 1 << 20)
                        for _ in 0..<32 { try await stream.send(chunk) }
                    }
                } catch {}
                // How the connection ended, once it has.
                for await state in connection.states {
                    if case .failed(let error) = state { outcomes.add(error) }
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let rssBefore = residentBytes()
        var readers: [NetworkConnection<QUIC>] = []
        defer { for reader in readers { reader.cancel() } }
        for _ in 0..<3 {
            let hostile = NetworkConnection(to: endpoint) { testClient() }
            readers.append(hostile)
            // Twenty streams: each holds at most 1 MiB in the listener's engine, the connection
            // at most its 16 MiB budget. On a loaded machine the first clients can take the
            // listener to its limit before the last one has opened its streams: that one is
            // refused (or closed) as busy, which is the bound at work.
            do {
                for _ in 0..<20 {
                    let stream = try await hostile.openStream()
                    try await stream.send(Data("flood".utf8))
                }
            } catch NetworkError.serverBusy(_, _) {}
        }
        let budget = try await waitForBudget(listener) { $0.closedConnections >= 1 && $0.buffered <= limit }
        let rssPeak = residentBytes()
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.buffered <= limit, "buffered \(budget.buffered) of \(limit)")
        // The closed connections' handlers saw why.
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < budget.closedConnections && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(outcomes.serverBusy >= 1)

        // A client that reads is served once the listener is back under its limit (it may
        // still be busy draining a closed connection's bytes: such a client tries again).
        var echoed: Data?
        let served = ContinuousClock.now + .seconds(120)
        while echoed == nil && ContinuousClock.now < served {
            let reader = NetworkConnection(to: endpoint) { testClient() }
            defer { reader.cancel() }
            do {
                let stream = try await reader.openStream()
                try await stream.send(Data("echo me".utf8), endOfStream: true)
                echoed = try await stream.receive(exactly: 7).content
            } catch NetworkError.serverBusy(_, _) {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(echoed == Data("echo me".utf8))
        print("QUIC buffer limit \(limit >> 20) MiB: budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections); process RSS \(rssBefore >> 20) -> \(rssPeak >> 20) MiB")
    }

    /// Six TCP clients never read what the listener sends them in 16 KiB sends (each connection
    /// holds up to its 1 MiB send buffer once the kernel's buffers are full); the listener's limit is 1 MiB,
    /// so it closes stalled connections until under it, and a client that reads is echoed after.
    @Test func tcpListenerClosesStalledHoldersToStayWithinItsLimit() async throws {
        let limit = 1 << 20
        let outcomes = Outcomes()
        // The six start sending together, so that they all hold bytes (the first alone would
        // take the listener to its limit and have the others refused).
        let arrived = Locked(0)
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP() }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                do {
                    let (request, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                    if request.first == UInt8(ascii: "e") {
                        try await connection.send(request)
                        return
                    }
                    arrived.withLock { $0 += 1 }
                    let together = ContinuousClock.now + .seconds(60)
                    while arrived.withLock({ $0 }) < 6 && ContinuousClock.now < together {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    // Small sends queue in the connection's outbox up to its bound (1 MiB).
                    let chunk = Data(repeating: 0x5A, count: 16 << 10)
                    for _ in 0..<4096 { try await connection.send(chunk) }
                } catch let error as NetworkError {
                    outcomes.add(error)
                    throw error
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        var hostile: [NetworkConnection<TCP>] = []
        defer { for connection in hostile { connection.cancel() } }
        for _ in 0..<6 {
            let connection = NetworkConnection(to: endpoint) { TCP() }
            hostile.append(connection)
            // Refused (reset) if the first ones already took the listener to its limit.
            do { try await connection.send(Data("flood".utf8)) } catch is NetworkError {}
        }
        let budget = try await waitForBudget(listener) { $0.closedConnections >= 1 && $0.buffered <= limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.buffered <= limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)

        #expect(try await echoOnceServed(at: endpoint, listener: listener, limit: limit) == Data("echo me".utf8))
        print("TCP buffer limit \(limit >> 20) MiB: budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections)")
    }

    /// A TCP peer that never reads but sends a byte every quarter second (so its connection
    /// receives something between any two sweeps) holds what the listener's application sends
    /// it; bytes received from the peer are no drain, so the listener closes it and serves a
    /// new client after.
    @Test func tcpListenerClosesATricklingPeerThatNeverReads() async throws {
        // Well below what the connection comes to hold (its outbox, once the kernel's buffers,
        // whose size varies, are full).
        let limit = 32 << 10
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP() }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                do {
                    let (request, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                    if request.first == UInt8(ascii: "e") {
                        try await connection.send(request)
                        return
                    }
                    // One send of 64 MiB, far more than the kernel's buffers take: it waits in
                    // the connection's outbox, where the loop writes it as the socket takes it,
                    // and holds what the socket has not taken. Small sends instead needed a
                    // task switch each once the outbox was full, and on a loaded machine too
                    // few came in the test's wait to fill the kernel's buffers.
                    try await connection.send(Data(repeating: 0x5A, count: 64 << 20))
                } catch let error as NetworkError {
                    outcomes.add(error)
                    throw error
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let trickler = NetworkConnection(to: endpoint) { TCP() }
        defer { trickler.cancel() }
        try await trickler.send(Data("flood".utf8))
        // The peer's pace, not a wait for an event: it ends when the listener closes it.
        let trickling = Task {
            while !Task.isCancelled {
                try await trickler.send(Data([0x2E]))
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        defer { trickling.cancel() }
        let budget = try await waitForBudget(listener) { $0.closedConnections >= 1 && $0.buffered < limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)

        #expect(try await echoOnceServed(at: endpoint, listener: listener, limit: limit) == Data("echo me".utf8))
    }

    /// A QUIC client sends 512 KiB on each of three streams whose handlers read 7 bytes and no
    /// more (the streams' windows: 512 KiB, so the peer may send nothing more): the listener's
    /// connection holds what arrives in Braid's stream inboxes, which the budget counts (1.5 MiB
    /// of the 2 MiB limit). Meanwhile another client is echoed. Then three more such streams
    /// take the connection past the limit, and the listener closes it.
    @Test func quicListenerCountsStreamBytesItsApplicationNeverReads() async throws {
        let limit = 2 << 20
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer().initialMaxData(4 << 20).initialMaxStreamDataBidirectionalRemote(512 << 10)
        }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                try await connection.inboundStreams { stream in
                    let (request, _) = try await stream.receive(exactly: 7)
                    if request.first == UInt8(ascii: "e") {
                        try await stream.send(request, endOfStream: true)
                        return
                    }
                    // Reads nothing more; waits for the connection's end.
                    for await state in connection.states {
                        if case .failed(let error) = state { outcomes.add(error) }
                    }
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let hostile = NetworkConnection(to: endpoint) { testClient() }
        defer { hostile.cancel() }
        let payload = Data("flood..".utf8) + Data(repeating: 0x5A, count: (512 << 10) - 7)
        // Sends `payload` on three new streams (each send completes once the engine has it).
        @Sendable func sendOnThreeStreams() async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<3 {
                    let stream = try await hostile.openStream()
                    group.addTask { try await stream.send(payload) }
                }
                try await group.waitForAll()
            }
        }
        try await sendOnThreeStreams()
        // All but the 7 bytes each handler read.
        let held = 3 * ((512 << 10) - 7)
        let budget = try await waitForBudget(listener) { $0.buffered >= held }
        #expect(budget.buffered >= held && budget.buffered < limit, "buffered \(budget.buffered)")
        // Served while the other connection holds its bytes.
        let reader = NetworkConnection(to: endpoint) { testClient() }
        defer { reader.cancel() }
        let stream = try await reader.openStream()
        try await stream.send(Data("echo me".utf8), endOfStream: true)
        #expect(try await stream.receive(exactly: 7).content == Data("echo me".utf8))
        #expect(budget.closedConnections == 0)

        // The listener may close the connection while the last of these are on their way.
        do { try await sendOnThreeStreams() } catch is NetworkError {}
        _ = try await waitForBudget(listener) { $0.closedConnections >= 1 && $0.buffered < limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        // Six streams' bytes bound what the connection could hold, with what ngtcp2's
        // reassembly buffers of the six might hold besides.
        #expect(budget.peak <= 2 * (512 << 10) * 3 + 6 * (17 << 10) + (64 << 10), "peak \(budget.peak)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)
        print("QUIC unread stream bytes, limit \(limit >> 20) MiB: budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections)")
    }

    /// Eight aioquic connections send, on four streams each, all of the stream's window but
    /// its first byte (`hostile_peer.py --gaps`), to a listener whose application never reads
    /// them: ngtcp2 keeps every byte out of order in its reassembly buffers, which Braid cannot
    /// measure but bounds from the windows it granted. The listener's limit (1 MiB) is less than
    /// the eight hold together (a 256 KiB window each, the listener's default): the budget
    /// counts them, the listener closes stalled ones ("server busy") until under its limit, and
    /// a client that reads is echoed.
    @Test func quicListenerCountsOutOfOrderBytesNgtcp2Holds() async throws {
        let limit = 1 << 20
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            QUIC(alpn: ["echo", "hostile"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                for await state in connection.states {
                    if state == .ready, connection.negotiatedALPN == "echo" { return try await echo(connection) }
                    if case .failed(let error) = state { outcomes.add(error) }
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let hostile = try PeerProcess.hostile([
            "--host", "127.0.0.1", "--port", String(listener.port!.rawValue), "--alpn", "hostile", "--ca", Fixtures.caFile,
            "--sni", "localhost", "--gaps", "4", "--connections", "8", "--hold", "120", "--timeout", "30",
        ])
        let holding = try await hostile.jsonLine(within: 120) { $0["holding"] != nil }
        #expect(holding["acknowledged"] as? Int ?? 0 >= 4, "\(holding)")

        let budget = try await waitForBudget(listener) { $0.closedConnections >= 1 && $0.buffered < limit }
        // What the connections that got in hold out of order, counted: over the limit at first.
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        // A client that reads is served: refused while the listener is at its limit, it tries
        // again once under it, until a generous deadline.
        let deadline = ContinuousClock.now + .seconds(90)
        var served = 0
        while served < 2 && ContinuousClock.now < deadline {
            let reader = NetworkConnection(to: endpoint) { testClient() }
            served = (try? await echoOnConcurrentStreams(reader, count: 2)) ?? 0
            reader.cancel()
            if served < 2 { _ = try await waitForBudget(listener) { $0.buffered < limit } }
        }
        #expect(served == 2)
        // The closed connections' handlers saw `serverBusy`; their peers got the reason.
        let busy = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < busy { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)
        await hostile.stop()
        let report = hostile.jsonLines.last ?? [:]
        #expect(report["closed_by_peer"] as? Int ?? 0 >= 1, "\(report)")
        let reasons = report["reasons"] as? [String] ?? []
        #expect(reasons.contains { $0.contains("server busy") }, "\(report)")
        print("QUIC out-of-order bytes, limit \(limit >> 20) MiB: \(holding), budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections); peer: \(report)")
    }

    /// A limit of zero or less would refuse every client: `run` rejects it.
    @Test(arguments: [0, -1]) func aListenerRejectsALimitThatIsNotPositive(_ limit: Int) async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP() }
        listener.connectionBufferLimit = limit
        do {
            try await listener.run { _ in }
            Issue.record("run accepted connectionBufferLimit \(limit)")
        } catch let error as NetworkError {
            guard case .invalidConfiguration(let message) = error else {
                Issue.record("expected invalidConfiguration, got \(error)")
                return
            }
            #expect(message.contains("connectionBufferLimit"))
        }
    }

    /// The budget's own arithmetic: a loop's figure is the sum of its connections; only
    /// connections that hold bytes and drained too few of them since the last sweep are picked,
    /// largest first, and only as many as cover the excess.
    @Test func anAccountPicksTheLargestStalledHoldersCoveringTheExcess() {
        let budget = ListenerBufferBudget(limit: 100)
        var account = ListenerBufferAccount<Int>(budget: budget)
        typealias Holding = ListenerBufferAccount<Int>.Holding
        // First sweep: over the limit, but nothing is known to be stalled yet.
        #expect(account.sweep([Holding(key: 1, bytes: 80, drained: 0), Holding(key: 2, bytes: 50, drained: 0), Holding(key: 3, bytes: 30, drained: 0)]).isEmpty)
        #expect(budget.buffered == 160 && budget.isExhausted)
        // Second: 1 drained all it held (and was refilled); 2 and 3 drained nothing. Getting
        // below the limit (61 bytes) needs 2 (50) and 3 (30).
        #expect(account.sweep([Holding(key: 1, bytes: 80, drained: 80), Holding(key: 2, bytes: 50, drained: 0), Holding(key: 3, bytes: 30, drained: 0)]) == [2, 3])
        #expect(budget.closedConnections == 2)
        // Third: 2 and 3 are gone; under the limit, nobody is picked.
        #expect(account.sweep([Holding(key: 1, bytes: 80, drained: 160)]).isEmpty)
        #expect(budget.buffered == 80 && !budget.isExhausted)
        #expect(budget.peak == 160)
        account.withdraw()
        #expect(budget.buffered == 0)
    }

    /// A connection that drains a byte a sweep out of what it holds is stalled, though its
    /// figure moves; one that drains `minimumDrain` is not.
    @Test func anAccountTreatsATrickleAsStalled() {
        let budget = ListenerBufferBudget(limit: 1 << 20)
        var account = ListenerBufferAccount<Int>(budget: budget)
        typealias Holding = ListenerBufferAccount<Int>.Holding
        let minimum = UInt64(ListenerBufferBudget.minimumDrain)
        #expect(account.sweep([Holding(key: 1, bytes: 800 << 10, drained: 0), Holding(key: 2, bytes: 400 << 10, drained: 0)]).isEmpty)
        // 1 (the larger) drains a minimum; 2 a byte. Only 2 can go, and it covers the excess.
        #expect(account.sweep([Holding(key: 1, bytes: 800 << 10, drained: minimum), Holding(key: 2, bytes: 400 << 10, drained: 1)]) == [2])
    }

    /// An idle QUIC connection holds only its receive windows' bound (`reserved`): it is not
    /// stalled, so while the one holding bytes drains, the idle one stays; it would go only with
    /// the largest holders, after sweeps at the limit, and behind the larger one.
    @Test func anAccountDoesNotTreatReservedBytesAsStalled() {
        let budget = ListenerBufferBudget(limit: 1 << 20)
        var account = ListenerBufferAccount<Int>(budget: budget)
        typealias Holding = ListenerBufferAccount<Int>.Holding
        let minimum = UInt64(ListenerBufferBudget.minimumDrain)
        let idle = Holding(key: 2, bytes: 100 << 10, drained: 0, reserved: 100 << 10)
        #expect(account.sweep([Holding(key: 1, bytes: 1 << 20, drained: 0), idle]).isEmpty)
        // 1 drains; 2 drains nothing but holds nothing seen: neither is stalled.
        #expect(account.sweep([Holding(key: 1, bytes: 1 << 20, drained: minimum), idle]).isEmpty)
        #expect(account.sweep([Holding(key: 1, bytes: 1 << 20, drained: 2 * minimum), idle]) == [1])
    }

    /// Connections that all drain fast but keep the listener at its limit: after
    /// `sweepsBeforeClosingAnyHolder` sweeps in a row the largest go anyway, so new clients are
    /// not refused for ever.
    @Test func anAccountClosesTheLargestHoldersAfterSweepsAtTheLimit() {
        let budget = ListenerBufferBudget(limit: 1 << 20)
        var account = ListenerBufferAccount<Int>(budget: budget)
        typealias Holding = ListenerBufferAccount<Int>.Holding
        let step = UInt64(1 << 20)
        var picked: [[Int]] = []
        for sweep in 1...ListenerBufferBudget.sweepsBeforeClosingAnyHolder {
            let drained = step * UInt64(sweep)
            picked.append(account.sweep([Holding(key: 1, bytes: 700 << 10, drained: drained), Holding(key: 2, bytes: 500 << 10, drained: drained)]))
        }
        #expect(picked.dropLast().allSatisfy { $0.isEmpty })
        #expect(picked.last == [1])
        #expect(budget.closedConnections == 1)
    }

    /// Two loops over one budget each shed their share of the excess (their part of what is
    /// buffered), not all of it: together they close about the excess, not twice it.
    @Test func loopsSplitTheExcessBetweenThem() {
        let budget = ListenerBufferBudget(limit: 100)
        var first = ListenerBufferAccount<Int>(budget: budget)
        var second = ListenerBufferAccount<Int>(budget: budget)
        typealias Holding = ListenerBufferAccount<Int>.Holding
        let firstHoldings = (0..<10).map { Holding(key: $0, bytes: 12, drained: 0) }
        let secondHoldings = (10..<20).map { Holding(key: $0, bytes: 12, drained: 0) }
        #expect(first.sweep(firstHoldings).isEmpty)
        #expect(second.sweep(secondHoldings).isEmpty)
        // 240 buffered, 141 to go; each loop holds half.
        let closing = first.sweep(firstHoldings) + second.sweep(secondHoldings)
        let shed = closing.count * 12
        #expect(shed >= 141 && shed < 141 + 2 * 12, "shed \(shed) bytes")
        // Picked connections not ended yet are not picked again, nor more for them.
        #expect(first.sweep(firstHoldings).isEmpty)
    }
}
