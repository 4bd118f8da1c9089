import Braid
import BraidPerf
import Foundation
import HTTPTypes
import Testing

/// HTTP/3 between Braid's tool and aioquic's HTTP/3 stack (`Tests/Interop/peers/aioquic_h3_peer.py`,
/// aioquic from the project's Python environment that tools/install-deps.sh makes): `braid get`
/// from aioquic's server, and aioquic's client from `braid serve --alpn h3`, byte-checked.
@Suite struct AioquicHTTP3InteropTests {
    /// Byte `i` of the peer's `/N` responses (and of the served file here).
    static func pattern(_ count: Int) -> Data {
        patternData(count) { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 10) }
    }

    @Test(.timeLimit(.minutes(10))) func braidGetFetchesFromAioquic() async throws {
        let server = try PeerProcess.aioquicHTTP3([
            "server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        let saved = FileManager.default.temporaryDirectory.appendingPathComponent("braid-h3-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: saved) }
        let get = try PeerProcess.braid([
            "get", "https://localhost:\(port)/3000000", "--ca", Fixtures.caFile, "--output", saved.path, "--timeout", "100",
        ])
        let exit = try await get.finish(within: 120)
        await server.stop()
        #expect(exit.status == 0, "braid get exited \(exit.status): \(get.errors)")
        #expect(try Data(contentsOf: saved) == Self.pattern(3_000_000))
    }

    /// Through `import Braid`: a 10 MB upload (the server answers with the count it read, in
    /// `x-request-bytes`) and 100 requests at once on the client's one connection.
    @Test(.timeLimit(.minutes(10))) func braidClientUploadsAndRunsConcurrentRequestsAgainstAioquic() async throws {
        let server = try PeerProcess.aioquicHTTP3([
            "server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).testTimeouts().trust(.certificateAuthorities(file: Fixtures.caFile)))
        defer { client.close() }
        let authority = "localhost:\(port)"
        let upload = HTTPRequest(method: .post, scheme: "https", authority: authority, path: "/0")
        let (_, uploaded) = try await client.upload(for: upload, from: Self.pattern(10_000_000))
        #expect(uploaded.status == .ok)
        #expect(uploaded.headerFields[HTTPField.Name("x-request-bytes")!] == "10000000")
        let bodies = try await withThrowingTaskGroup(of: (Int, Data, HTTPResponse.Status).self) { group in
            for index in 0..<100 {
                group.addTask {
                    let size = 1000 + index * 100
                    let (body, response) = try await client.data(for: HTTPRequest(method: .get, scheme: "https", authority: authority, path: "/\(size)"))
                    return (size, body, response.status)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        await server.stop()
        #expect(bodies.count == 100)
        for (size, body, status) in bodies {
            #expect(status == .ok)
            #expect(body == Self.pattern(size), "/\(size)")
        }
    }

    /// aioquic's client against a Braid listener (`runHTTP3` in this process): a 10 MB upload,
    /// which the handler checks byte by byte, and 100 requests at once on one connection.
    @Test(.timeLimit(.minutes(10))) func aioquicUploadsAndRunsConcurrentRequestsAgainstBraid() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer(alpn: ["h3"])
        }
        let serving = Task {
            try await listener.runHTTP3 { request, body in
                if request.method == .post {
                    // The upload's size, and whether it is the peer's pattern.
                    let upload = try await body.collect(upTo: 16 * 1024 * 1024)
                    return (HTTPResponse(status: .ok), .data(Data("\(upload.count) \(upload == Self.pattern(upload.count))".utf8)))
                }
                return (HTTPResponse(status: .ok), .data(Self.pattern(Int(request.path?.dropFirst() ?? "") ?? 0)))
            }
        }
        defer { serving.cancel() }
        try await listener.waitUntilReady()
        let port = String(listener.port!.rawValue)
        func run(_ arguments: [String]) async throws -> [String: Any] {
            try await runClient(try PeerProcess.aioquicHTTP3([
                "client", "--host", "127.0.0.1", "--port", port, "--ca", Fixtures.caFile, "--sni", "localhost", "--timeout", "240",
            ] + arguments), within: 280)
        }
        let uploaded = try await run(["--method", "POST", "--path", "/upload", "--upload", "10000000"])
        #expect(uploaded["status"] as? Int == 200)
        let answer = (uploaded["body_base64"] as? String).flatMap { Data(base64Encoded: $0) }
        #expect(answer == Data("10000000 true".utf8))
        let concurrent = try await run(["--path", "/5000", "--requests", "100"])
        #expect((concurrent["statuses"] as? [Int])?.count == 100)
        #expect((concurrent["statuses"] as? [Int])?.allSatisfy { $0 == 200 } == true)
        #expect((concurrent["sizes"] as? [Int])?.allSatisfy { $0 == 5000 } == true)
        #expect(concurrent["identical"] as? Bool == true)
        #expect(concurrent["pattern"] as? Bool == true)
    }

    @Test(.timeLimit(.minutes(10))) func aioquicFetchesFromBraidServe() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("braid-h3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try Self.pattern(2 * 1024 * 1024).write(to: root.appendingPathComponent("blob"))
        let server = try PeerProcess.braid([
            "serve", "--alpn", "h3", "--root", root.path, "--host", "127.0.0.1", "--port", "0",
            "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        func fetch(_ path: String) async throws -> [String: Any] {
            try await runClient(try PeerProcess.aioquicHTTP3([
                "client", "--host", "127.0.0.1", "--port", String(port), "--path", path, "--ca", Fixtures.caFile, "--sni", "localhost",
            ]), within: 120)
        }
        let file = try await fetch("/blob")
        #expect(file["status"] as? Int == 200)
        #expect(file["bytes"] as? Int == 2 * 1024 * 1024)
        #expect(file["pattern"] as? Bool == true)
        // `/N` answers N bytes of "a": SHA-256 of a million "a" is the standard's test vector.
        let sized = try await fetch("/1000000")
        #expect(sized["status"] as? Int == 200)
        #expect(sized["bytes"] as? Int == 1_000_000)
        #expect(sized["sha256"] as? String == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        let missing = try await fetch("/no-such-file")
        #expect(missing["status"] as? Int == 404)
        await server.stop()
    }

    /// `braid get` resumes with the ticket aioquic's server gave the previous run and sends its
    /// GET as 0-RTT data, which aioquic accepts.
    @Test(.timeLimit(.minutes(10))) func braidGetSendsZeroRTTToAioquic() async throws {
        let server = try PeerProcess.aioquicHTTP3([
            "server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        let sessionFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-h3-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: sessionFile) }
        // 127.0.0.1, not localhost: a connection racing two addresses does not resume.
        func get() async throws -> [String: Any] {
            try await runClient(try PeerProcess.braid([
                "get", "https://127.0.0.1:\(port)/100000", "--ca", Fixtures.caFile, "--json", "--session-file", sessionFile, "--timeout", "100",
            ]), within: 120)
        }
        let fresh = try await get()
        let resumed = try await get()
        await server.stop()
        #expect(fresh["status"] as? Int == 200)
        #expect(fresh["early_data"] as? Bool == false)
        #expect(resumed["status"] as? Int == 200)
        #expect(resumed["bytes"] as? Int == 100_000)
        #expect(resumed["early_data"] as? Bool == true, "the GET did not go as accepted 0-RTT data: \(resumed)")
    }

    /// aioquic's client resumes against `braid serve` and sends its GET before the handshake
    /// completes, as 0-RTT data, which Braid accepts and answers.
    @Test(.timeLimit(.minutes(10))) func aioquicSendsZeroRTTToBraidServe() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("braid-h3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let server = try PeerProcess.braid([
            "serve", "--alpn", "h3", "--root", root.path, "--host", "127.0.0.1", "--port", "0",
            "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
        ])
        let port = try await server.listeningPort()
        let sessionFile = root.appendingPathComponent("ticket").path
        func fetch() async throws -> [String: Any] {
            try await runClient(try PeerProcess.aioquicHTTP3([
                "client", "--host", "127.0.0.1", "--port", String(port), "--path", "/1000000", "--ca", Fixtures.caFile,
                "--sni", "localhost", "--session-file", sessionFile,
            ]), within: 120)
        }
        let fresh = try await fetch()
        let resumed = try await fetch()
        await server.stop()
        #expect(fresh["resumed"] as? Bool == false)
        #expect(resumed["resumed"] as? Bool == true)
        #expect(resumed["early_data_accepted"] as? Bool == true)
        #expect(resumed["status"] as? Int == 200)
        #expect(resumed["sha256"] as? String == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// An aioquic server that sends GOAWAY at the 40th request of each connection and refuses
    /// that request and those past it (H3_REQUEST_REJECTED), against `HTTP3Client` keeping 20
    /// in flight: all 300 complete, byte-checked, the refused ones sent again on new
    /// connections.
    @Test(.timeLimit(.minutes(10))) func braidClientLosesNoRequestWhenAioquicSendsGoaway() async throws {
        let server = try PeerProcess.aioquicHTTP3([
            "server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
            "--goaway-after", "40",
        ])
        let port = try await server.listeningPort()
        let client = HTTP3Client(quic: QUIC(alpn: ["h3"]).testTimeouts().trust(.certificateAuthorities(file: Fixtures.caFile)))
        defer { client.close() }
        let authority = "localhost:\(port)"
        let completed: Int
        do {
            completed = try await withThrowingTaskGroup(of: Bool.self) { group in
                var completed = 0
                for index in 0..<300 {
                    if index >= 20, try await group.next() == true { completed += 1 }
                    group.addTask {
                        let (body, response) = try await client.data(for: HTTPRequest(method: .get, scheme: "https", authority: authority, path: "/2000"))
                        return response.status == .ok && body == Self.pattern(2000)
                    }
                }
                for try await intact in group where intact { completed += 1 }
                return completed
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
        #expect(completed == 300, "\(completed) of 300 responses arrived intact")
        let counts = try #require(server.jsonLines.last, "the server printed no counts: \(server.errors)")
        // 39 answered per connection: at least 7 GOAWAYs, each refusing at least its request.
        let goaways = counts["goaways"] as? Int ?? 0
        #expect(goaways >= 7, "\(counts)")
        #expect(counts["rejected"] as? Int ?? 0 >= goaways, "\(counts)")
        #expect(client.requestsRetried >= goaways, "\(client.requestsRetried) requests sent again")
        #expect(client.connectionsOpened >= 7, "\(client.connectionsOpened) connections for 300 requests")
    }

    /// aioquic's load client (which follows RFC 9114's GOAWAY rules) keeping 20 requests in
    /// flight against a Braid listener that shuts each connection down gracefully after 40
    /// requests: all 300 complete, byte-checked, none lost.
    @Test(.timeLimit(.minutes(10))) func aioquicLosesNoRequestWhenBraidSendsGoaway() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer(alpn: ["h3"])
        }
        let serving = Task {
            try await listener.runHTTP3(requestsPerConnection: 40) { request, _ in
                (HTTPResponse(status: .ok), .data(Self.pattern(Int(request.path?.dropFirst() ?? "") ?? 0)))
            }
        }
        defer { serving.cancel() }
        try await listener.waitUntilReady()
        let report = try await runClient(try PeerProcess.aioquicHTTP3([
            "load", "--host", "127.0.0.1", "--port", String(listener.port!.rawValue), "--ca", Fixtures.caFile, "--sni", "localhost",
            "--path", "/2000", "--requests", "300", "--concurrency", "20",
        ]), within: 120)
        #expect(report["completed"] as? Int == 300, "\(report)")
        #expect(report["lost"] as? Int == 0)
        #expect(report["pattern"] as? Bool == true)
        // Each connection takes 40 requests and at most 19 more in GOAWAY's first round trip.
        let connections = report["connections"] as? Int ?? 0
        #expect(connections >= 5, "\(report)")
        // Each connection that reached 40 sent its notice (the final GOAWAY too, which can be
        // lost with the close when the client has nothing left in flight).
        #expect(report["goaways"] as? Int ?? 0 >= connections - 1, "\(report)")
    }
}
