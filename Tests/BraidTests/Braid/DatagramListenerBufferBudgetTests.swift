import BraidIO
import Foundation
import MetricsTestKit
import Testing

@testable import Braid

/// `NetworkListener.connectionBufferLimit` on UDP and DTLS listeners over loopback: a peer
/// whose datagrams the listener's application never reads makes its connection hold them (up
/// to the inbox's bound, far above the limit); the listener closes it once over the limit and
/// another peer is served while the flood goes on. And what UDP and DTLS listeners refuse at
/// their limits counts in `braid_listener_refused_total`.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DatagramListenerBufferBudgetTests {
    /// What the listener's handlers saw, from any task.
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
        while !condition(budget) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return budget
    }

    /// The handler of both listeners: a peer whose first message starts with "e" is echoed,
    /// every message; any other peer's connection is left unread until it ends.
    private static func handle<P: NetworkProtocol>(
        _ connection: NetworkConnection<P>, outcomes: Outcomes,
        receive: @escaping @Sendable () async throws -> Data, send: @escaping @Sendable (Data) async throws -> Void
    ) async throws {
        do {
            let first = try await receive()
            if first.first == UInt8(ascii: "e") {
                try await send(first)
                while true { try await send(try await receive()) }
            }
        } catch let error as NetworkError {
            outcomes.add(error)
            return
        }
        for await state in connection.states {
            if case .failed(let error) = state { outcomes.add(error) }
        }
    }

    /// Sends `payload` on `connection` until `stop` holds or the connection fails (a DTLS peer
    /// closed by the listener hears close_notify); returns the datagrams sent. A deadline keeps
    /// a test that never sees `stop` from sending for ever.
    private static func flood(
        _ payload: Data, until stop: @escaping @Sendable () -> Bool, send: @escaping @Sendable (Data) async throws -> Void
    ) -> Task<(sent: Int, ended: Bool), Never> {
        Task {
            let deadline = ContinuousClock.now + .seconds(120)
            var sent = 0
            while !stop() && !Task.isCancelled && ContinuousClock.now < deadline {
                do {
                    try await send(payload)
                } catch {
                    return (sent, true)
                }
                sent += 1
                // The attacker's pace, not a wait for an event: 64 at a time, about 12,000 a
                // second, far past what the limits take within a sweep, without taking the
                // machine's cores from tests running beside this one.
                if sent % 64 == 0 { try? await Task.sleep(for: .milliseconds(5)) }
            }
            return (sent, false)
        }
    }

    /// A UDP peer sends 8 KiB datagrams its connection's application never reads (the inbox
    /// keeps up to 4,096 of them, 32 MiB); the listener's limit is 2 MiB. While the flood goes
    /// on, another peer is echoed; the listener closes the flooding peer's connection
    /// (`serverBusy`) and is back under its limit.
    @Test func udpListenerClosesAPeerItsApplicationNeverReads() async throws {
        let limit = 2 << 20
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { UDP() }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                try await Self.handle(
                    connection, outcomes: outcomes, receive: { try await connection.receive().content },
                    send: { try await connection.send($0) })
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let budget = try #require(listener.bufferBudget.withLock { $0 })

        // The flood goes on until the reader was served and the listener closed the flooding
        // peer at least once (its address then starts a new connection, which floods again).
        let served = Locked(false)
        let hostile = NetworkConnection(to: endpoint) { UDP() }
        defer { hostile.cancel() }
        let flooding = Self.flood(Data(repeating: 0x5A, count: 8 << 10), until: { served.withLock { $0 } && budget.closedConnections >= 1 }) {
            try await hostile.send($0)
        }
        defer { flooding.cancel() }
        // The flooding peer holds bytes, counted: another peer is served meanwhile.
        _ = try await waitForBudget(listener) { $0.buffered >= limit / 4 }
        #expect(budget.buffered >= limit / 4, "buffered \(budget.buffered)")
        let reader = NetworkConnection(to: endpoint) { UDP() }
        defer { reader.cancel() }
        let echoed = try await udpEcho(Data("echo me".utf8), on: reader)
        #expect(echoed?.content == Data("echo me".utf8))
        served.withLock { $0 = true }

        _ = try await waitForBudget(listener) { $0.closedConnections >= 1 }
        let (sent, _) = await flooding.value
        _ = try await waitForBudget(listener) { $0.buffered < limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        // One peer's inbox bounds what it could hold: the figure counts those bytes, not more.
        let inboxBound = DatagramChannel.inboxBacklog * ((8 << 10) + MemoryLayout<ReceivedDatagram>.stride)
        #expect(budget.peak <= inboxBound + limit, "peak \(budget.peak), one inbox holds at most \(inboxBound)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)
        // And after: a new peer is served.
        let after = NetworkConnection(to: endpoint) { UDP() }
        defer { after.cancel() }
        #expect(try await udpEcho(Data("echo again".utf8), on: after)?.content == Data("echo again".utf8))
        print(
            "UDP buffer limit \(limit >> 20) MiB: \(sent) datagrams of 8 KiB sent, budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections)"
        )
    }

    /// DTLS clients, one after another, send messages their connections' application never
    /// reads; the listener's limit is 1 MiB. While the flood goes on, a client connected before
    /// it is echoed; the
    /// listener closes the flooding client's connection (`serverBusy` on its side) and is back
    /// under its limit; the client's later records start no connection (not a ClientHello).
    @Test func dtlsListenerClosesAPeerItsApplicationNeverReads() async throws {
        let limit = 1 << 20
        let outcomes = Outcomes()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        listener.connectionBufferLimit = limit
        let task = Task {
            try await listener.run { connection in
                try await Self.handle(
                    connection, outcomes: outcomes, receive: { try await connection.receive().content },
                    send: { try await connection.send($0) })
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let budget = try #require(listener.bufferBudget.withLock { $0 })
        let client: @Sendable () -> NetworkConnection<DTLS> = {
            NetworkConnection(to: endpoint) {
                DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
            }
        }

        // A client connected before the flood, served throughout. (A client arriving during a
        // flood of new clients competes with them for the moments the listener is under its
        // limit: new clients are refused at it.)
        let reader = client()
        defer { reader.cancel() }
        try await reader.send(Data("echo hello".utf8))
        #expect(try await reader.receive().content == Data("echo hello".utf8))

        // Flooding clients, one after another (a closed one's records start no connection),
        // until the reader was served and the listener closed at least one of them.
        let served = Locked(false)
        let flooding = Task {
            var sent = 0
            let deadline = ContinuousClock.now + .seconds(120)
            while !(served.withLock { $0 } && budget.closedConnections >= 1) && !Task.isCancelled && ContinuousClock.now < deadline {
                let hostile = client()
                defer { hostile.cancel() }
                let closedBefore = budget.closedConnections
                // A message that fits one record of the default datagram size.
                let one = await Self.flood(Data(repeating: 0x5A, count: 1000), until: { budget.closedConnections > closedBefore }) {
                    try await hostile.send($0)
                }.value
                sent += one.sent
            }
            return sent
        }
        defer { flooding.cancel() }
        _ = try await waitForBudget(listener) { $0.buffered >= limit / 4 }
        #expect(budget.buffered >= limit / 4, "buffered \(budget.buffered)")
        // Served while the flood goes on.
        try await reader.send(Data("echo me".utf8))
        #expect(try await reader.receive().content == Data("echo me".utf8))
        served.withLock { $0 = true }

        _ = try await waitForBudget(listener) { $0.closedConnections >= 1 }
        let sent = await flooding.value
        _ = try await waitForBudget(listener) { $0.buffered < limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1)
        // The reader is still served, and so is a new client.
        try await reader.send(Data("echo again".utf8))
        #expect(try await reader.receive().content == Data("echo again".utf8))
        let after = client()
        defer { after.cancel() }
        try await after.send(Data("echo after".utf8))
        #expect(try await after.receive().content == Data("echo after".utf8))
        print(
            "DTLS buffer limit \(limit >> 20) MiB: \(sent) messages of 1000 bytes sent, budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections)"
        )
    }

    /// What a UDP listener's peers hold shows in `braid_listener_buffered_bytes`: 64 datagrams
    /// of 4 KiB that the application never reads.
    @Test func udpBufferedBytesShowInTheListenersGauge() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let server = try await RunningUDPEcho.start { connection in
                // Reads nothing; waits for the end.
                for await _ in connection.states {}
            }
            defer { server.task.cancel() }
            let peer = NetworkConnection(to: server.endpoint) { UDP() }
            defer { peer.cancel() }
            let budget = try #require(server.listener.bufferBudget.withLock { $0 })
            let payload = Data(repeating: 0x5A, count: 4096)
            // UDP may drop some on the way: sent again until the listener holds them all.
            let deadline = ContinuousClock.now + .seconds(60)
            while budget.buffered < 64 * 4096 && ContinuousClock.now < deadline {
                for _ in 0..<64 { try await peer.send(payload) }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(budget.buffered >= 64 * 4096, "buffered \(budget.buffered)")
            let gauge = { (try? metrics.expectGauge("braid_listener_buffered_bytes", [("stack", "udp"), ("listener", "")]))?.lastValue ?? 0 }
            try await ConnectionMetricsTests.eventually("the listener's gauge") { gauge() >= 64 * 4096 }
            // Each datagram counts its payload and its entry, nothing more.
            let held = Double(budget.buffered)
            #expect(held <= Double(DatagramChannel.inboxBacklog * (4096 + MemoryLayout<ReceivedDatagram>.stride)), "buffered \(held)")
        }
    }

    /// A UDP listener full of proven peers (`newConnectionLimit` 1) drops a new peer's
    /// datagrams: each counts in the listener's refusals.
    @Test func udpRefusalsAtTheConnectionLimitAreCounted() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let server = try await RunningUDPEcho.start(limit: 1)
            defer { server.task.cancel() }
            let first = NetworkConnection(to: server.endpoint) { UDP() }
            defer { first.cancel() }
            // Echoed, then heard from again: proven, so a new peer cannot displace it. (A
            // reply may be the echo of an earlier resend: only that one came is checked.)
            #expect(try await udpEcho(Data("a".utf8), on: first) != nil)
            #expect(try await udpEcho(Data("b".utf8), on: first) != nil)
            let second = NetworkConnection(to: server.endpoint) { UDP() }
            defer { second.cancel() }
            let refused = { ConnectionMetricsTests.total(metrics, "braid_listener_refused_total", [("stack", "udp")]) }
            let deadline = ContinuousClock.now + .seconds(60)
            while refused() < 1 && ContinuousClock.now < deadline {
                try await second.send(Data("c".utf8))
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(refused() >= 1)
            let budget = try #require(server.listener.bufferBudget.withLock { $0 })
            #expect(budget.refusedConnections >= 1)
            // The first peer is still served: its "d" comes back (after any late echoes of
            // its earlier resends), until a deadline.
            let served = ContinuousClock.now + .seconds(60)
            var reply = try await udpEcho(Data("d".utf8), on: first)
            while reply?.content != Data("d".utf8) && ContinuousClock.now < served {
                if let late = try await receiveWithin(.seconds(1), on: first) {
                    reply = late
                } else {
                    reply = try await udpEcho(Data("d".utf8), on: first)
                }
            }
            #expect(reply?.content == Data("d".utf8))
        }
    }

    /// A DTLS listener at `newConnectionLimit` 1 refuses a second client's ClientHello (after
    /// its cookie): it counts in the listener's refusals.
    @Test func dtlsRefusalsAtTheConnectionLimitAreCounted() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
                DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                    certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
            }
            listener.newConnectionLimit = 1
            listener.metricsLabel = "dtls-limit"
            let task = Task {
                try await listener.run { connection in
                    for try await (content, _) in connection.messages { try await connection.send(content) }
                }
            }
            defer { task.cancel() }
            try await listener.waitUntilReady()
            let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
            let client = {
                NetworkConnection(to: endpoint) {
                    DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
                }
            }
            let first = client()
            defer { first.cancel() }
            try await first.send(Data("a".utf8))
            #expect(try await first.receive().content == Data("a".utf8))
            // The second client's handshake gets no answer once its hello carries a cookie.
            let second = client()
            defer { second.cancel() }
            let attempt = Task { try await second.send(Data("b".utf8)) }
            defer { attempt.cancel() }
            try await ConnectionMetricsTests.eventually("the listener's refusal") {
                ConnectionMetricsTests.total(metrics, "braid_listener_refused_total", [("stack", "dtls"), ("listener", "dtls-limit")]) >= 1
            }
            let budget = try #require(listener.bufferBudget.withLock { $0 })
            #expect(budget.refusedConnections >= 1)
            // The first client is still served.
            try await first.send(Data("c".utf8))
            #expect(try await first.receive().content == Data("c".utf8))
        }
    }

    /// A UDP peer floods 60,000-byte datagrams its connection's application never reads:
    /// fewer than the inbox's backlog of 4,096, and far more bytes than its byte limit
    /// (`DatagramChannel.inboxByteLimit`). The listener's own limit (1 GiB) never binds, so
    /// only the inbox's limit stands between the peer and 240 MiB: the inbox drops the oldest
    /// beyond it (counted in the connection's `droppedDatagramCount`), the listener's figure
    /// never passes it, and another peer is echoed meanwhile.
    @Test func udpInboxHoldsAtMostItsByteLimit() async throws {
        let payload = Data(repeating: 0x5A, count: 60_000)
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { UDP() }
        listener.connectionBufferLimit = 1 << 30
        let unread = Locked<NetworkConnection<UDP>?>(nil)
        let task = Task {
            try await listener.run { connection in
                guard let first = try? await connection.receive().content else { return }
                if first.first == UInt8(ascii: "e") {
                    try await connection.send(first)
                    while true { try await connection.send(try await connection.receive().content) }
                }
                unread.withLock { $0 = connection }
                for await _ in connection.states {}
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let budget = try #require(listener.bufferBudget.withLock { $0 })

        let hostile = NetworkConnection(to: endpoint) { UDP() }
        defer { hostile.cancel() }
        // The attacker's pace: 16 at a time, about 3,000 a second (the kernel drops what the
        // listener's socket cannot take), until the inbox has dropped some or 3,000 are sent.
        var sent = 0
        var dropped = 0
        while dropped == 0 && sent < 3_000 {
            for _ in 0..<16 { try await hostile.send(payload) }
            sent += 16
            try await Task.sleep(for: .milliseconds(5))
            dropped = await unread.withLock({ $0 })?.droppedDatagramCount ?? 0
        }
        // Another peer is served while the flooding peer holds its inbox full.
        let reader = NetworkConnection(to: endpoint) { UDP() }
        defer { reader.cancel() }
        #expect(try await udpEcho(Data("echo me".utf8), on: reader)?.content == Data("echo me".utf8))
        // A sweep has counted the full inbox.
        _ = try await waitForBudget(listener) { $0.buffered >= DatagramChannel.inboxByteLimit / 2 }
        let bound = DatagramChannel.inboxByteLimit + (64 << 10)
        #expect(dropped > 0, "\(sent) datagrams of 60,000 bytes sent, none dropped by the inbox; budget peak \(budget.peak)")
        #expect(budget.buffered >= DatagramChannel.inboxByteLimit / 2, "buffered \(budget.buffered)")
        #expect(budget.peak <= bound, "peak \(budget.peak), the inbox's limit \(DatagramChannel.inboxByteLimit)")
        #expect(budget.closedConnections == 0)
        print("UDP inbox byte limit: \(sent) datagrams of 60,000 bytes sent, \(dropped) dropped by the inbox, budget peak \(budget.peak) bytes")
    }
}
