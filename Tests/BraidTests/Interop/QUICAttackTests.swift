import Braid
import BraidCore
import BraidPerf
import Foundation
import HTTPTypes
import Testing

/// The published attacks on QUIC servers, made by an aioquic client that writes its own frames
/// after a real handshake, or its own Initials before one
/// (`Tests/Interop/peers/quic_attack_peer.py`). Each test checks the defence itself (the close
/// and its transport error, what the server acknowledged or answered, the memory the
/// `braid serve` process it attacks holds), and that the listener then serves a legitimate
/// client.
@Suite(.serialized, HostileScale.timeLimit) struct QUICAttackTests {
    /// An attack the listener must answer by closing the connection with `code`.
    struct Closing: Sendable, CustomTestStringConvertible {
        var attack: String
        var arguments: [String] = []
        var code: Int
        /// RFC 9000's name of the code, which the listener's error must give.
        var name: String
        var testDescription: String { "\(attack) -> \(name)" }
    }

    static let closings = [
        // More connection IDs than the listener's active_connection_id_limit (RFC 9000 §5.1.1).
        Closing(attack: "new-cid-limit", arguments: ["--count", "20"], code: 0x9, name: "CONNECTION_ID_LIMIT_ERROR"),
        // CVE-2024-22189: each NEW_CONNECTION_ID retires all earlier IDs and the client never
        // acknowledges the RETIRE_CONNECTION_ID frames; ngtcp2 keeps at most 16 unacknowledged
        // retirements and closes past them, where an unbounded queue would grow per frame.
        Closing(attack: "new-cid-retire", arguments: ["--count", String(HostileScale.count(1000))], code: 0x9, name: "CONNECTION_ID_LIMIT_ERROR"),
        Closing(attack: "retire-cid-unissued", code: 0xa, name: "PROTOCOL_VIOLATION"),
        // A 1-RTT CRYPTO frame 70,000 bytes ahead: past the 64 KiB ngtcp2 keeps out of order.
        Closing(attack: "crypto-gap", code: 0xd, name: "CRYPTO_BUFFER_EXCEEDED"),
        // An acknowledgement of a packet number never sent (RFC 9000 §13.1).
        Closing(attack: "ack-unsent", code: 0xa, name: "PROTOCOL_VIOLATION"),
        // ACK ranges that run below packet number 0.
        Closing(attack: "ack-ranges", code: 0x7, name: "FRAME_ENCODING_ERROR"),
        // 1,500 one-byte pieces of one stream, none in order: ngtcp2 refuses a stream's
        // 1,000th gap, so out-of-order state stays per stream at most 1,000 pieces.
        Closing(attack: "stream-fragments", arguments: ["--count", String(HostileScale.count(1500)), "--streams", "1"], code: 0xa, name: "PROTOCOL_VIOLATION"),
    ]

    @Test(arguments: closings)
    func attackIsClosedWithItsTransportError(_ closing: Closing) async throws {
        let endings = HostilePeerTests.Endings()
        // `echo` connections are echoed; the attacker's (`hostile`) are watched to their end.
        let server = try await RunningListener.start(alpn: ["echo", "hostile"], handler: { connection in
            for await state in connection.states {
                if state == .ready, connection.negotiatedALPN == "echo" { return try await echo(connection) }
                if case .failed(let error) = state { endings.failures.withLock { $0.append(error) } }
            }
        })
        defer { server.task.cancel() }
        let peer = try PeerProcess.quicAttack(
            ["--port", String(server.listener.port!.rawValue), "--alpn", "hostile", "--attack", closing.attack, "--timeout", "90"] + closing.arguments)
        let report = try await runClient(peer, within: HostileScale.seconds(150))
        #expect(report["closed_by"] as? String == "peer", "\(report)\nstderr: \(peer.errors)")
        #expect(report["error_code"] as? Int == closing.code, "\(report)")
        #expect((report["reason"] as? String)?.isEmpty == false, "\(report)")

        let deadline = ContinuousClock.now + .seconds(60)
        while endings.failures.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let failures = endings.failures.withLock { $0 }
        if case .protocolError(let code, let reason, let byPeer) = failures.first {
            #expect(code == UInt64(closing.code))
            #expect(!byPeer)
            #expect(!reason.isEmpty && !reason.hasPrefix("ERR_"), "the reason names ngtcp2's error, not what the peer did: \(reason)")
            #expect(failures[0].description.contains(closing.name), "\(failures[0])")
        } else {
            Issue.record("the listener's connection ended with \(failures), not a protocol error")
        }

        let legitimate = NetworkConnection(to: server.endpoint) { testClient() }
        defer { legitimate.cancel() }
        #expect(try await echoOnConcurrentStreams(legitimate, count: 2) == 2)
    }

    /// CVE-2023-49295: 20,000 PATH_CHALLENGE frames, about 130 to a packet. ngtcp2 keeps the
    /// last 4 challenges it has not answered, so the listener sends at most 4 responses per
    /// packet of challenges (a server that queued one response per challenge would send 20,000),
    /// holds no more memory, and the connection goes on.
    @Test func pathChallengeFloodIsAnsweredAtMostFourPerPacket() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try server.attack(["--attack", "path-challenge", "--count", String(HostileScale.count(20000))]), within: HostileScale.seconds(120))
        let challenges = try #require(report["challenges"] as? Int)
        let packets = try #require(report["packets"] as? Int)
        let responses = try #require(report["path_responses"] as? Int)
        print("PATH_CHALLENGE flood: \(challenges) challenges in \(packets) packets, \(responses) responses; \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(responses <= 4 * packets, "\(report)")
        #expect(responses < challenges / 10, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// 100 rounds of retiring every connection ID the listener issued: it issues replacements,
    /// but never keeps more than ngtcp2's pool of 8, and its memory stays put.
    @Test func retireConnectionIDFloodKeepsTheIssuedPoolBounded() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try server.attack(["--attack", "retire-cid-flood", "--count", String(HostileScale.count(100))]), within: HostileScale.seconds(180))
        let retired = try #require(report["retired"] as? Int)
        let highest = try #require(report["highest_sequence"] as? Int)
        print("RETIRE_CONNECTION_ID flood: \(retired) retired, highest sequence issued \(highest); \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(retired >= HostileScale.count(100), "\(report)")
        #expect(highest <= retired + 8, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// 20,000 packets whose numbers skip every other one: the listener's record of what to
    /// acknowledge is bounded (ngtcp2 keeps 1,024 ranges at most), so memory stays put and the
    /// connection goes on.
    @Test func packetNumberGapsDoNotGrowTheAcknowledgementRecord() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try server.attack(["--attack", "pn-gaps", "--count", String(HostileScale.count(20000))]), within: HostileScale.seconds(120))
        print("packet-number gap flood: \(report["packets"] ?? "?") packets; \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// 990 one-byte out-of-order pieces on each of 99 streams (98,010 pieces, just under
    /// ngtcp2's 1,000 per stream): the connection stays open, and what the listener holds is
    /// bounded by streams x 1,000 pieces (plus the windows' bytes).
    @Test func streamFragmentsOnEveryStreamStayBounded() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(
            try server.attack(["--attack", "stream-fragments", "--count", "990", "--expect-open", "--hold", "2"]), within: 180)
        print("STREAM fragmentation: \(report["frames"] ?? "?") pieces on \(report["streams"] ?? "?") streams; \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(report["frames"] as? Int ?? 0 >= 90_000, "\(report)")
        #expect(server.peakGrowth < 64 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// CVE-2024-1765, before the handshake: a ClientHello, then CRYPTO pieces up to 100,000
    /// bytes with a gap after it. The listener keeps (and acknowledges) pieces up to 64 KiB past
    /// what it has in order and drops the rest unacknowledged.
    @Test func initialCryptoBeyondSixtyFourKiBIsDropped() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try server.attack(["--attack", "initial-crypto-gap"]), within: 60)
        let hello = try #require(report["hello_bytes"] as? Int)
        let kept = try #require(report["highest_acked_end"] as? Int)
        print("Initial CRYPTO gap: kept out of order up to byte \(kept) (ClientHello \(hello) bytes), \(report["unacked_pieces"] ?? "?") pieces dropped")
        #expect(kept > hello + 32_768, "the listener kept almost nothing out of order: \(report)")
        #expect(kept <= hello + 65_536, "\(report)")
        #expect(report["unacked_pieces"] as? Int ?? 0 > 0, "\(report)")
        try await server.expectServes()
    }

    /// CVE-2024-1765 across connections: 300 handshakes, each filling its 64 KiB of
    /// out-of-order CRYPTO data. Retry turns on at 50 half-open handshakes, so the listener
    /// holds at most about 50 x 64 KiB of them, and gives the memory back once they time out.
    @Test func initialCryptoFloodIsBoundedByTheHalfOpenCap() async throws {
        let server = try await ServeProcess.start(["--retry-threshold", "50", "--half-open-limit", "100"])
        defer { Task { await server.process.stop() } }
        let report = try await runClient(
            try server.attack(["--attack", "initial-crypto-flood", "--count", String(HostileScale.count(300)), "--crypto-bytes", "65000"]), within: HostileScale.seconds(240))
        print("Initial CRYPTO flood: \(report); \(server.memory())")
        #expect(report["retries"] as? Int ?? 0 > 0, "Retry never turned on: \(report)")
        #expect(server.peakGrowth < 48 << 20, "\(server.memory())")
        try await server.expectServes()
        try await server.expectMemoryReturns()
    }

    /// CVE-2025-54939 ("QUIC-LEAK"): 2,000 ClientHellos, each with undecryptable 0-RTT and
    /// Handshake packets coalesced after it and 4 more datagrams of them. ngtcp2 keeps at
    /// most 4 such packets per connection, Retry bounds the connections, and once their
    /// handshakes time out the memory comes back.
    @Test func coalescedPacketFloodBeforeTheHandshakeLeaksNothing() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try server.attack(["--attack", "coalesced-flood", "--count", String(HostileScale.count(2000))]), within: HostileScale.seconds(240))
        print("coalesced pre-handshake flood: \(report); \(server.memory())")
        #expect(report["replies"] as? Int ?? 0 > 0, "\(report)")
        #expect(server.peakGrowth < 96 << 20, "\(server.memory())")
        try await server.expectServes()
        try await server.expectMemoryReturns()
    }
}

extension QUICAttackTests {
    /// Five connections that grant no flow-control credit while asking for 1 GB on each of 100
    /// streams: the listener queues each one's send budget (16 MiB). Once they end, the process
    /// gives that memory back (the held bytes falling to half their peak trim the heap), where
    /// five connections alone would never trigger a trim by their count.
    @Test func memoryComesBackAfterNonCreditingConnectionsEnd() async throws {
        let server = try await ServeProcess.start()
        defer { Task { await server.process.stop() } }
        let peers = try (0..<5).map { _ in
            try PeerProcess.hostile([
                "--host", "127.0.0.1", "--port", String(server.port), "--alpn", "perf", "--ca", Fixtures.caFile, "--sni", "localhost",
                "--starve", "100", "--size", String(1 << 30), "--window", "65536", "--hold", "90",
            ])
        }
        for peer in peers { _ = try await peer.jsonLine(within: 60) { $0["starving"] != nil } }
        // The listener fills the five send budgets (an event: its memory grows by most of 80 MiB).
        let deadline = ContinuousClock.now + .seconds(60)
        while server.status("VmRSS") - server.baseline < 48 << 20, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        print("five non-crediting connections: \(server.memory())")
        #expect(server.status("VmRSS") - server.baseline >= 48 << 20, "the send budgets never filled: \(server.memory())")
        for peer in peers { await peer.stop() }
        try await server.expectMemoryReturns()
        try await server.expectServes()
    }
}

/// A `braid serve` process (perf and echo over QUIC) to attack, whose memory is its own.
struct ServeProcess {
    let process: ChildProcess
    let port: UInt16
    /// Serving HTTP/3 (`--alpn h3`: `/N` answers N bytes) instead of perf and echo.
    let http3: Bool
    /// VmRSS once it listened, before any attack.
    let baseline: Int

    static func start(_ arguments: [String] = [], http3: Bool = false) async throws -> ServeProcess {
        let process = try PeerProcess.braid(
            ["serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")]
                + (http3 ? ["--alpn", "h3", "--root", NSTemporaryDirectory()] : []) + arguments)
        let port = try await process.listeningPort(within: 60)
        // One connection first, so the baseline includes what serving anyone costs.
        let server = ServeProcess(process: process, port: port, http3: http3, baseline: 0)
        try await server.expectServes()
        return ServeProcess(process: process, port: port, http3: http3, baseline: server.status("VmRSS"))
    }

    func attack(_ arguments: [String]) throws -> ChildProcess {
        try PeerProcess.quicAttack(["--port", String(port)] + arguments)
    }

    /// A field of /proc/PID/status in bytes (VmRSS: now; VmHWM: the peak).
    func status(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
            let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kib * 1024
    }

    var peakGrowth: Int { status("VmHWM") - baseline }

    func memory() -> String {
        "braid serve RSS \(baseline >> 20) MiB before, peak \(status("VmHWM") >> 20) MiB, now \(status("VmRSS") >> 20) MiB"
    }

    func expectServes() async throws {
        if http3 {
            let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
            defer { client.close() }
            let (body, response) = try await client.data(
                for: HTTPRequest(method: .get, scheme: "https", authority: "127.0.0.1:\(port)", path: "/5"))
            #expect(response.status == .ok && body.count == 5)
            return
        }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) { testClient() }
        defer { connection.cancel() }
        #expect(try await echoOnConcurrentStreams(connection, count: 2) == 2)
    }

    /// Once the attack's connections end (their 10 s handshake or 30 s idle timeout), the
    /// process gives most of what it grew back: within a quarter of the growth (or 16 MiB) of
    /// its baseline. A bounded wait, nothing timed.
    func expectMemoryReturns() async throws {
        let grown = status("VmHWM") - baseline
        let allowed = max(grown / 4, 16 << 20)
        let deadline = ContinuousClock.now + .seconds(90)
        while status("VmRSS") - baseline > allowed, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
        }
        print("after the attack: \(memory())")
        #expect(status("VmRSS") - baseline <= allowed, "\(memory())")
    }
}

extension PeerProcess {
    /// The aioquic client that makes the published QUIC attacks (`quic_attack_peer.py`),
    /// against 127.0.0.1 with the test CA, ALPN echo.
    static func quicAttack(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(
            try aioquicPython,
            [repository.appendingPathComponent("Tests/Interop/peers/quic_attack_peer.py").path, "--host", "127.0.0.1", "--alpn", "echo",
             "--ca", Fixtures.caFile, "--sni", "localhost"] + arguments)
    }
}

extension QUICAttackTests {
    /// A peer that opens unidirectional streams without end, one byte and FIN each, as fast
    /// as the listener gives their credit back. ngtcp2 0.12.1 keeps every one until the
    /// connection ends (the stream object, and a reassembly buffer when its bytes came out of
    /// order), so the listener lets one connection open 1,000 over its life: the peer gets no
    /// credit past them, and once they are consumed the connection closes with NO_ERROR and a
    /// reason that says so. HTTP/3 (whose server reads a reserved stream type and drops it)
    /// alike. A legitimate client is served meanwhile and after.
    @Test(arguments: [(outOfOrder: false, http3: false), (outOfOrder: true, http3: false), (outOfOrder: true, http3: true)])
    func unidirectionalStreamsWithoutEndStopAtTheLifetimeLimit(outOfOrder: Bool, http3: Bool) async throws {
        let server = try await ServeProcess.start(http3: http3)
        defer { Task { await server.process.stop() } }
        let meanwhile = Task { try await server.expectServes() }
        let attacker = try server.attack(
            ["--attack", "uni-streams", "--count", "1000000", "--timeout", "60"] + (outOfOrder ? ["--out-of-order"] : [])
                + (http3 ? ["--alpn", "h3"] : []))
        let report = try await runClient(attacker, within: 150)
        print("unidirectional streams without end (out of order: \(outOfOrder), HTTP/3: \(http3)): \(report); \(server.memory())")
        #expect(report["closed_by"] as? String == "peer", "\(report)\nstderr: \(attacker.errors)")
        #expect(report["error_code"] as? Int == 0, "\(report)")
        #expect((report["reason"] as? String)?.hasPrefix("unidirectional stream limit reached") == true, "\(report)")
        #expect(report["opened"] as? Int == 1000, "\(report)")
        #expect(report["granted"] as? Int == 1000, "\(report)")
        // What ngtcp2 kept of 1,000 streams, each with a reassembly buffer when out of order.
        #expect(server.peakGrowth < (outOfOrder ? 48 : 16) << 20, "\(server.memory())")
        try await meanwhile.value
        try await server.expectServes()
    }
}
