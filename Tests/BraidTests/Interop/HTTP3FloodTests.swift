import Braid
import BraidCore
import BraidHTTP3
import BraidPerf
import Foundation
import HTTPTypes
import Testing

/// Field-section and QPACK floods from a real HTTP/3 peer
/// (`Tests/Interop/peers/aioquic_h3_hostile.py`, writing its own QPACK bytes on aioquic's
/// streams) against `braid serve --alpn h3`: each request or instruction past a limit ends
/// with RFC 9114's or RFC 9204's code, what the server holds stays bounded, and it serves a
/// legitimate client afterwards.
@Suite(.serialized, HostileScale.timeLimit) struct HTTP3FloodTests {
    /// 50 requests, each a 256 KiB header section of literal fields (the limit is 64 KiB): each
    /// request stream is reset with H3_EXCESSIVE_LOAD and the fields past the limit are not
    /// kept, so the connection goes on and memory stays put.
    @Test func oversizedFieldSectionsAreResetWithExcessiveLoad() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let count = HostileScale.count(50)
        let report = try await runClient(try flood(server, mode: "field-section-flood", count: count), within: HostileScale.seconds(120))
        print("field-section flood: \(report); \(server.memory())")
        let resets = report["resets"] as? [String: Int] ?? [:]
        #expect(resets[String(BraidHTTP3.HTTP3ErrorCode.excessiveLoad.code)] == count, "\(report)")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// 50,000 inserts of 100-byte entries (5 MB) on the QPACK encoder stream: the server's
    /// dynamic table holds 4 KiB, so each evicts older ones; the connection goes on and memory
    /// stays put.
    @Test func qpackInsertFloodStaysWithinTheTableCapacity() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "qpack-insert-flood", count: HostileScale.count(50_000)), within: HostileScale.seconds(180))
        print("QPACK insert flood: \(report); \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// One insert larger than the table capacity the server allows closes the connection
    /// with QPACK_ENCODER_STREAM_ERROR.
    @Test func anInsertLargerThanTheTableClosesWithEncoderStreamError() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "qpack-oversized-insert", count: 1), within: 60)
        #expect(report["closed"] as? Int == Int(BraidHTTP3.HTTP3ErrorCode.qpackEncoderStreamError.code), "\(report)")
        try await server.expectServes()
    }

    /// The "rapid reset" attack (CVE-2023-44487's HTTP/3 form) against `braid serve`: 2,000
    /// requests, each reset once the server has taken it. The default cancellation limit (200
    /// at once, 200 per 10 s) closes the connection with H3_EXCESSIVE_LOAD long before the
    /// attack's end, memory stays put, and the server serves a legitimate client afterwards.
    @Test func rapidResetPastTheCancellationLimitClosesWithExcessiveLoad() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "rapid-reset", count: HostileScale.count(2000)), within: HostileScale.seconds(180))
        print("rapid reset: \(report); \(server.memory())")
        #expect(report["closed"] as? Int == Int(BraidHTTP3.HTTP3ErrorCode.excessiveLoad.code), "\(report)")
        #expect((report["reason"] as? String)?.contains("cancelled more than 200 requests") == true, "\(report)")
        let resets = try #require(report["resets"] as? Int)
        // Closed at the 201st cancellation, give or take the budget refilled meanwhile and the
        // round of 100 in flight.
        #expect(resets > 200 && resets < 1000, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// Rapid reset against handlers that do not return until the test lets them (and ignore
    /// their cancellation), with no cancellation limit: each request's stream counts against
    /// the client's limit (100) until its handler returns, so the attacker stalls at 100
    /// requests, at most 100 handlers run at once, and a legitimate client on another
    /// connection is served during the attack. Once the handlers return, the attacker's
    /// credit comes back and its other 200 requests are served the same way.
    @Test func resetRequestsHoldTheirStreamUntilTheirHandlersReturn() async throws {
        let handlers = GatedHandlers()
        let total = HostileScale.count(300)
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer(alpn: ["h3"])
        }
        let serving = Task {
            try await listener.runHTTP3(requestCancellationLimit: nil) { request, _ in
                if request.path == "/hold" { await handlers.hold() }
                return (HTTPResponse(status: .ok), .data(Data("hello".utf8)))
            }
        }
        defer { serving.cancel() }
        for await state in listener.states where state == .ready { break }
        let port = try #require(listener.port?.rawValue)
        let attack = try PeerProcess.aioquicHTTP3Hostile([
            "client", "--mode", "rapid-reset", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost",
            "--count", String(total), "--path", "/hold", "--stall", "120", "--timeout", "60",
        ])
        let stalled = try await attack.jsonLine(within: 90) { $0["stalled"] != nil }
        #expect(stalled["requests"] as? Int == 100, "\(stalled)")
        let deadline = ContinuousClock.now + .seconds(60)
        while handlers.counts.started < 100, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }

        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { client.close() }
        let (body, response) = try await client.data(
            for: HTTPRequest(method: .get, scheme: "https", authority: "localhost:\(port)", path: "/5"))
        #expect(response.status == .ok && body == Data("hello".utf8))
        let during = handlers.counts
        #expect(during.started == 100 && during.running == 100, "\(during)")

        handlers.open()
        let report = try await runClient(attack, within: HostileScale.seconds(180))
        let after = handlers.counts
        print("rapid reset held by handlers: \(report); handlers \(after)")
        #expect(report["requests"] as? Int == total && report["resets"] as? Int == total, "\(report)")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(after.mostRunning <= 100, "\(after)")
        #expect(after.started > 100, "the attacker's credit never came back: \(after)")
    }

    private func flood(_ server: ServeProcess, mode: String, count: Int) throws -> ChildProcess {
        try PeerProcess.aioquicHTTP3Hostile([
            "client", "--mode", mode, "--port", String(server.port), "--ca", Fixtures.caFile, "--sni", "localhost",
            "--count", String(count), "--timeout", String(Int(HostileScale.seconds(60))),
        ])
    }
}

/// Request handlers that wait, cancelled or not, until `open()`; and how many ran.
final class GatedHandlers: Sendable {
    struct Counts: Sendable, CustomStringConvertible {
        var started = 0
        var running = 0
        var mostRunning = 0
        var description: String { "\(started) started, \(running) running, at most \(mostRunning) at once" }
    }

    private let state = Locked<(counts: Counts, isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((Counts(), false, []))

    var counts: Counts { state.withLock { $0.counts } }

    func hold() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let proceed = state.withLock { state -> Bool in
                state.counts.started += 1
                state.counts.running += 1
                state.counts.mostRunning = max(state.counts.mostRunning, state.counts.running)
                if !state.isOpen { state.waiting.append(continuation) }
                return state.isOpen
            }
            if proceed { continuation.resume() }
        }
        state.withLock { $0.counts.running -= 1 }
    }

    func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
