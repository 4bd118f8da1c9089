import BraidPerf
import Foundation
import Testing

/// HTTP/3 between Braid's tool and ngtcp2's example programs (Debian's ngtcp2-server and
/// ngtcp2-client, which tools/install-deps.sh installs): `braid get` from `gtlsserver`, and
/// `gtlsclient` from `braid serve --alpn h3`, byte-checked against files.
@Suite struct Ngtcp2HTTP3InteropTests {
    static func program(_ name: String) throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        throw InteropFailure("\(name) is not installed: run tools/install-deps.sh (Debian packages ngtcp2-server and ngtcp2-client)")
    }

    /// A directory with `index.html` and a file of `size` pattern bytes named `blob`.
    static func documentRoot(size: Int) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("braid-h3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data("hello over HTTP/3\n".utf8).write(to: root.appendingPathComponent("index.html"))
        // Byte i is i * 7 + i >> 10 (mod 256), which repeats every 256 KiB: made once, then copied.
        let period = 256 * 1024
        let block = patternData(period) { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 10) }
        var blob = Data(capacity: size)
        while blob.count < size { blob.append(block.prefix(size - blob.count)) }
        try blob.write(to: root.appendingPathComponent("blob"))
        return root
    }

    @Test func braidGetFetchesFromGtlsserver() async throws {
        let root = try Self.documentRoot(size: 100 * 1024 * 1024)
        defer { try? FileManager.default.removeItem(at: root) }
        let port = try freePort(.udp)
        let server = try ChildProcess(try Self.program("gtlsserver"), [
            "-q", "-d", root.path, "127.0.0.1", String(port), Fixtures.path("server-key.pem"), Fixtures.path("server.pem"),
        ])
        do {
            try await fetch(port: port, root: root)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    private func fetch(port: UInt16, root: URL) async throws {
        let saved = root.appendingPathComponent("fetched")
        let url = "https://localhost:\(port)/blob"
        // gtlsserver prints nothing when it is ready: the first tries may find no one there.
        var fetched = false
        let deadline = ContinuousClock.now + .seconds(120)
        while !fetched && ContinuousClock.now < deadline {
            let client = try PeerProcess.braid(["get", url, "--ca", Fixtures.caFile, "--output", saved.path, "--timeout", "20"])
            let exit = try await client.finish(within: 60)
            if exit.status == 0 {
                fetched = true
            } else if !client.errors.contains("refused") && !client.errors.contains("timed out") {
                Issue.record("braid get exited \(exit.status): \(client.errors)")
                return
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(fetched, "gtlsserver never answered on port \(port)")
        #expect(try Data(contentsOf: saved) == Data(contentsOf: root.appendingPathComponent("blob")))
        let sized = try PeerProcess.braid(["get", "https://localhost:\(port)/1000000", "--ca", Fixtures.caFile, "--json"])
        let report = try await runClient(sized)
        #expect(report["status"] as? Int == 200)
        #expect(report["bytes"] as? Int == 1_000_000)
    }

    @Test func gtlsclientFetchesFromBraidServe() async throws {
        let root = try Self.documentRoot(size: 3 * 1024 * 1024)
        defer { try? FileManager.default.removeItem(at: root) }
        let downloads = root.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let server = try PeerProcess.braid([
            "serve", "--alpn", "h3", "--root", root.path, "--host", "127.0.0.1", "--port", "0",
            "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        let client = try ChildProcess(try Self.program("gtlsclient"), [
            "-q", "--exit-on-all-streams-close", "--download", downloads.path, "127.0.0.1", String(port),
            "https://localhost:\(port)/blob", "https://localhost:\(port)/1000000", "https://localhost:\(port)/index.html",
        ])
        let exit = try await client.finish(within: 60)
        await server.stop()
        #expect(exit.status == 0, "gtlsclient exited \(exit.status): \(client.errors)")
        #expect(try Data(contentsOf: downloads.appendingPathComponent("blob")) == Data(contentsOf: root.appendingPathComponent("blob")))
        #expect(try Data(contentsOf: downloads.appendingPathComponent("index.html")) == Data("hello over HTTP/3\n".utf8))
        #expect(try Data(contentsOf: downloads.appendingPathComponent("1000000")) == Data(repeating: 0x61, count: 1_000_000))
    }

    /// `braid get` resumes with the ticket gtlsserver gave the previous run (kept in
    /// `--session-file`) and sends its GET as 0-RTT data, which gtlsserver accepts.
    @Test func braidGetSendsZeroRTTToGtlsserver() async throws {
        let root = try Self.documentRoot(size: 0)
        defer { try? FileManager.default.removeItem(at: root) }
        let port = try freePort(.udp)
        let server = try ChildProcess(try Self.program("gtlsserver"), [
            "-q", "-d", root.path, "127.0.0.1", String(port), Fixtures.path("server-key.pem"), Fixtures.path("server.pem"),
        ])
        let sessionFile = root.appendingPathComponent("tickets").path
        // 127.0.0.1, not localhost: a connection racing two addresses does not resume.
        func get() async throws -> [String: Any] {
            try await runClient(try PeerProcess.braid([
                "get", "https://127.0.0.1:\(port)/100000", "--ca", Fixtures.caFile, "--json", "--session-file", sessionFile, "--timeout", "20",
            ]))
        }
        do {
            // gtlsserver prints nothing when it is ready: the first tries may find no one there.
            var first: [String: Any]?
            let deadline = ContinuousClock.now + .seconds(120)
            while first == nil && ContinuousClock.now < deadline {
                first = try? await get()
                if first == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            let fresh = try #require(first, "gtlsserver never answered on port \(port)")
            #expect(fresh["status"] as? Int == 200)
            #expect(fresh["early_data"] as? Bool == false)
            let resumed = try await get()
            #expect(resumed["status"] as? Int == 200)
            #expect(resumed["bytes"] as? Int == 100_000)
            #expect(resumed["early_data"] as? Bool == true, "the GET did not go as accepted 0-RTT data: \(resumed)")
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// gtlsclient resumes against `braid serve` with the session and transport parameters it
    /// saved, and sends its request in 0-RTT packets, which Braid accepts (gtlsclient reports a
    /// rejection as "Early data was rejected by server").
    @Test func gtlsclientSendsZeroRTTToBraidServe() async throws {
        let root = try Self.documentRoot(size: 0)
        defer { try? FileManager.default.removeItem(at: root) }
        let downloads = root.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let server = try PeerProcess.braid([
            "serve", "--alpn", "h3", "--root", root.path, "--host", "127.0.0.1", "--port", "0",
            "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        func fetch() async throws -> ChildProcess {
            // Without -q: its log shows which packets carried the request.
            let client = try ChildProcess(try Self.program("gtlsclient"), [
                "--exit-on-all-streams-close", "--download", downloads.path,
                "--session-file", root.appendingPathComponent("session").path, "--tp-file", root.appendingPathComponent("tp").path,
                "127.0.0.1", String(port), "https://localhost:\(port)/index.html",
            ])
            let exit = try await client.finish(within: 30)
            #expect(exit.status == 0, "gtlsclient exited \(exit.status)")
            return client
        }
        let fresh = try await fetch()
        let log = fresh.output + fresh.errors
        #expect(!log.contains("type=0RTT"), "the first connection had nothing to resume with")
        let resumed = try await fetch()
        await server.stop()
        let resumedLog = resumed.output + resumed.errors
        // The request stream (ID 0) went in a 0-RTT packet, and was not rejected.
        #expect(resumedLog.contains("0RTT STREAM(0x0b) id=0x0 fin=1"), "the request did not go as 0-RTT data")
        #expect(!resumedLog.contains("Early data was rejected"))
        #expect(resumedLog.contains(":status: 200"))
        #expect(try Data(contentsOf: downloads.appendingPathComponent("index.html")) == Data("hello over HTTP/3\n".utf8))
    }

    /// How each request stream of a gtlsclient run ended, from its log: a response
    /// (`stream 0x4 [:status: 200]`), and each stream's close with its HTTP/3 code (`HTTP
    /// stream 4 closed with error code 256`).
    struct GtlsclientOutcome {
        /// Streams answered 200 that closed with H3_NO_ERROR.
        var answered: Set<Int> = []
        /// Streams refused with H3_REQUEST_REJECTED: not processed, so a client may send them again.
        var refused: Set<Int> = []
        /// Streams that ended any other way (a close without a response, another code).
        var other: [Int: String] = [:]

        init(log: String) {
            var statuses: Set<Int> = []
            var closes: [Int: Int] = [:]
            for line in log.split(separator: "\n") {
                if let range = line.range(of: "http: stream 0x"), line.hasSuffix("[:status: 200]"),
                    let id = Int(line[range.upperBound...].prefix { $0.isHexDigit }, radix: 16) {
                    statuses.insert(id)
                } else if line.hasPrefix("HTTP stream "), line.contains(" closed with error code ") {
                    let fields = line.split(separator: " ")
                    if let id = Int(fields[2]), let code = fields.last.flatMap({ Int($0) }) { closes[id] = code }
                }
            }
            for id in Set(statuses).union(closes.keys) {
                switch (statuses.contains(id), closes[id]) {
                case (true, 0x100): answered.insert(id)
                case (false, 0x10b): refused.insert(id)
                case (let status, let code): other[id] = "status 200: \(status), closed with \(code.map { "0x" + String($0, radix: 16) } ?? "no close")"
                }
            }
        }
    }

    /// gtlsclient sends 100 requests at once to `braid serve --requests-per-connection 10`,
    /// which sends GOAWAY (a notice, then the final one two round trips later) while they run:
    /// no request is lost. Every request that arrived before the final GOAWAY is answered, and
    /// any that arrived after it (a loaded machine can spread gtlsclient's burst across it) is
    /// refused with H3_REQUEST_REJECTED, which tells the client it was not processed and may
    /// go elsewhere; the final GOAWAY's stream ID is the line between them, so every refused
    /// stream comes after every answered one. The server's grace period is generous, so that
    /// the requests it took finish however slowly a loaded machine runs gtlsclient. gtlsclient
    /// does not log HTTP/3 frames; its QUIC log shows how many bytes the server's control
    /// stream (ID 3, opened first) carried, which a run without GOAWAY measures for SETTINGS
    /// alone: GOAWAY frames are all that can follow them there.
    @Test func gtlsclientGetsEveryResponseWhileBraidServeSendsGoaway() async throws {
        let root = try Self.documentRoot(size: 0)
        defer { try? FileManager.default.removeItem(at: root) }
        func run(requests: Int, requestsPerConnection: Int?) async throws -> (outcome: GtlsclientOutcome, controlBytes: Int) {
            let server = try PeerProcess.braid([
                "serve", "--alpn", "h3", "--root", root.path, "--host", "127.0.0.1", "--port", "0",
                "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"), "--shutdown-grace-period", "600",
            ] + (requestsPerConnection.map { ["--requests-per-connection", String($0)] } ?? []))
            let port = try await server.listeningPort()
            let client = try ChildProcess(try Self.program("gtlsclient"), [
                "--exit-on-all-streams-close", "-n", String(requests), "127.0.0.1", String(port), "https://localhost:\(port)/1000",
            ])
            let exit = try await client.finish(within: 300)
            await server.stop()
            #expect(exit.status == 0, "gtlsclient exited \(exit.status)")
            let log = client.output + client.errors
            // The furthest byte by offset: a retransmission after a loss may carry several
            // frames' bytes in one STREAM frame.
            let ends = log.split(separator: "\n").filter { $0.contains("frm rx") && $0.contains(" id=0x3 ") }.compactMap { line -> Int? in
                let fields = Dictionary(line.split(separator: " ").compactMap { part -> (String, Int)? in
                    let pair = part.split(separator: "=", maxSplits: 1)
                    guard pair.count == 2, let value = Int(pair[1]) else { return nil }
                    return (String(pair[0]), value)
                }, uniquingKeysWith: { first, _ in first })
                guard let offset = fields["offset"], let length = fields["len"] else { return nil }
                return offset + length
            }
            return (GtlsclientOutcome(log: log), ends.max() ?? 0)
        }
        let settingsOnly = try await run(requests: 1, requestsPerConnection: nil)
        #expect(settingsOnly.outcome.answered == [0], "\(settingsOnly.outcome)")
        let rotated = try await run(requests: 100, requestsPerConnection: 10)
        let outcome = rotated.outcome
        print("gtlsclient's 100 requests to braid serve --requests-per-connection 10: \(outcome.answered.count) answered, \(outcome.refused.count) refused")
        // Client-initiated bidirectional streams: IDs 0, 4, 8, ...
        let requests = Set((0..<100).map { $0 * 4 })
        #expect(outcome.answered.union(outcome.refused) == requests && outcome.other.isEmpty,
                "requests neither answered nor refused: \(requests.subtracting(outcome.answered).subtracting(outcome.refused).sorted()); other endings: \(outcome.other)")
        #expect(outcome.answered.count >= 10, "only \(outcome.answered.count) answered before the connection's 10th request")
        if let lastAnswered = outcome.answered.max(), let firstRefused = outcome.refused.min() {
            #expect(lastAnswered < firstRefused, "stream \(firstRefused) was refused, yet the later stream \(lastAnswered) was answered")
        }
        // The notice is 10 bytes (type, length, an 8-byte ID), the final GOAWAY at least 3.
        #expect(rotated.controlBytes - settingsOnly.controlBytes >= 13,
                "control stream: \(rotated.controlBytes) bytes, \(settingsOnly.controlBytes) without GOAWAY")
    }
}
