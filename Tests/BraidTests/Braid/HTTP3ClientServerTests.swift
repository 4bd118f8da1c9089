import Braid
import BraidCore
import BraidHTTP3
import Foundation
import HTTPTypes
import Testing

/// Braid's HTTP/3 client against Braid's HTTP/3 server through the public API, in memory
/// (`MemoryWorld`).
@Suite struct HTTP3ClientServerTests {
    /// Handlers of `/wait-forever` that were cancelled (only `cancelledRequestCancelsItsHandler` asks for it).
    static let cancelledHandlers = Locked(0)
    static let startedHandlers = Locked(0)
    /// Handlers of `/hang` that started (only `listenerShutdownClosesWithNoError` asks for it).
    static let hangingHandlers = Locked(0)
    /// Handlers of `/slow` that started (only `gracefulShutdownLetsRequestsFinish` asks for it).
    static let slowHandlers = Locked(0)

    /// The byte at `index` of a generated body (so every byte is checked, not just the count).
    static func patternByte(_ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }

    static func pattern(_ count: Int) -> Data { patternData(count, patternByte) }

    /// The test server: `/hello` says hello; `/N` sends N pattern bytes, streamed; `/count`
    /// (POST) answers the upload's size and whether it matched the pattern; `/fail` throws.
    @Sendable static func handler(_ request: HTTPRequest, _ body: HTTP3IncomingBody) async throws -> (HTTPResponse, HTTP3ResponseBody) {
        let path = request.path ?? "/"
        if path == "/hello" {
            return (HTTPResponse(status: .ok, headerFields: [.contentType: "text/plain"]), .data(Data("hello, h3".utf8)))
        }
        if path == "/count" {
            let upload = try await body.collect(upTo: 32 * 1024 * 1024)
            let matches = upload == pattern(upload.count)
            return (HTTPResponse(status: .ok), .data(Data("\(upload.count) \(matches)".utf8)))
        }
        if path == "/wait-forever" {
            startedHandlers.withLock { $0 += 1 }
            do {
                try await Task.sleep(for: .seconds(3600))
            } catch {
                cancelledHandlers.withLock { $0 += 1 }
                throw error
            }
        }
        if path == "/hang" {
            hangingHandlers.withLock { $0 += 1 }
            try await Task.sleep(for: .seconds(3600))
        }
        if path == "/slow" {
            slowHandlers.withLock { $0 += 1 }
            try await Task.sleep(for: .milliseconds(500))
            return (HTTPResponse(status: .ok), .data(Data("finished".utf8)))
        }
        if path == "/fail" {
            throw NetworkError.invalidState("the handler failed on purpose")
        }
        if let count = Int(path.dropFirst()) {
            return (HTTPResponse(status: .ok, headerFields: [.contentLength: String(count)]), .stream { writer in
                var offset = 0
                while offset < count {
                    let end = min(offset + 100_000, count)
                    try await writer.write(Data((offset..<end).map(patternByte)))
                    offset = end
                }
            })
        }
        return (HTTPResponse(status: .notFound), .empty)
    }

    /// A listener serving `handler` on 127.0.0.1, and a client trusting its certificate.
    static func start(
        acceptingEarlyData: Bool = true, requestsPerConnection: Int? = nil, shutdownGracePeriod: Duration = .seconds(10)
    ) async throws -> (NetworkListener<QUIC>, Task<Void, any Error>, HTTP3Client, String) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer(alpn: ["h3"])
                .earlyDataEnabled(acceptingEarlyData)
        }
        let task = Task {
            try await listener.runHTTP3(requestsPerConnection: requestsPerConnection, shutdownGracePeriod: shutdownGracePeriod, handler)
        }
        try await listener.waitUntilReady()
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        return (listener, task, client, "127.0.0.1:\(listener.port!.rawValue)")
    }

    static func get(_ authority: String, _ path: String) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "https", authority: authority, path: path)
    }

    @Test(.timeLimit(.minutes(10))) func smallGet() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let (body, response) = try await client.data(for: Self.get(authority, "/hello"))
            #expect(response.status == .ok)
            #expect(response.headerFields[.contentType] == "text/plain")
            #expect(String(decoding: body, as: UTF8.self) == "hello, h3")
            let (missing, notFound) = try await client.data(for: Self.get(authority, "/nothing-here"))
            #expect(notFound.status == .notFound)
            #expect(missing.isEmpty)
        }
    }

    /// Opens a connection with one request, waits for the server's session ticket, and closes
    /// it, so the client's next connection to `authority` resumes.
    static func leaveTicket(_ client: HTTP3Client, _ authority: String, in world: MemoryWorld) async throws {
        _ = try await client.data(for: get(authority, "/hello"))
        #expect(try #require(client.earlyData(authority: authority)).requests == 0, "the first connection had no ticket to resume with")
        _ = try await world.eventually { client.quic.sessionCache?.count != 0 }
        try #require(client.quic.sessionCache?.count == 1, "no session ticket arrived")
        client.close()
    }

    /// A resumed connection sends its GET as 0-RTT data, which the server accepts and answers.
    @Test(.timeLimit(.minutes(10))) func zeroRTTGet() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            try await Self.leaveTicket(client, authority, in: world)
            let (body, response) = try await client.data(for: Self.get(authority, "/100000"))
            #expect(response.status == .ok)
            #expect(body == Self.pattern(100_000))
            let early = try #require(client.earlyData(authority: authority))
            #expect(early.accepted)
            #expect(early.requests == 1)
        }
    }

    /// A server that refuses early data still answers the GET the client sent as 0-RTT data:
    /// it goes again once the handshake completes.
    @Test(.timeLimit(.minutes(10))) func rejectedZeroRTTGetIsSentAgain() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start(acceptingEarlyData: false)
            defer { task.cancel(); client.close() }
            try await Self.leaveTicket(client, authority, in: world)
            let (body, response) = try await client.data(for: Self.get(authority, "/100000"))
            #expect(response.status == .ok)
            #expect(body == Self.pattern(100_000))
            let early = try #require(client.earlyData(authority: authority))
            #expect(!early.accepted)
            #expect(early.requests == 1)
        }
    }

    /// A POST on a resumed connection waits for the handshake (early data can be replayed).
    @Test(.timeLimit(.minutes(10))) func unsafeRequestsWaitForTheHandshake() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            try await Self.leaveTicket(client, authority, in: world)
            let upload = HTTPRequest(method: .post, scheme: "https", authority: authority, path: "/count")
            let (reply, response) = try await client.upload(for: upload, from: Self.pattern(5000))
            #expect(response.status == .ok)
            #expect(String(decoding: reply, as: UTF8.self) == "5000 true")
            let early = try #require(client.earlyData(authority: authority))
            #expect(early.requests == 0)
        }
    }

    @Test(.timeLimit(.minutes(10))) func tenMegabyteGetIsByteExact() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let count = 10 * 1024 * 1024
            let (body, response) = try await client.data(for: Self.get(authority, "/\(count)"))
            #expect(response.status == .ok)
            #expect(body.count == count)
            #expect(body == Self.pattern(count))
        }
    }

    @Test(.timeLimit(.minutes(10))) func tenMegabytePost() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let count = 10 * 1024 * 1024
            let request = HTTPRequest(method: .post, scheme: "https", authority: authority, path: "/count")
            let (body, response) = try await client.upload(for: request, from: Self.pattern(count))
            #expect(response.status == .ok)
            #expect(String(decoding: body, as: UTF8.self) == "\(count) true")
        }
    }

    /// A handler that answers without reading the upload: the client gets the response and
    /// abandons the rest of its body instead of waiting for flow-control credit forever.
    @Test(.timeLimit(.minutes(10))) func uploadIgnoredByTheHandlerStillGetsItsResponse() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let request = HTTPRequest(method: .post, scheme: "https", authority: authority, path: "/hello")
            // Several in turn: the bodies left unread must not use up the connection's window.
            let upload = Self.pattern(8 * 1024 * 1024)
            for _ in 0..<6 {
                let (body, response) = try await client.upload(for: request, from: upload)
                #expect(response.status == .ok)
                #expect(body == Data("hello, h3".utf8))
            }
            let (again, _) = try await client.data(for: Self.get(authority, "/hello"))
            #expect(again == Data("hello, h3".utf8))
        }
    }

    /// A request the client abandons (RESET_STREAM) cancels its handler on the server.
    @Test(.timeLimit(.minutes(10))) func cancelledRequestCancelsItsHandler() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let waiting = Task { try await client.data(for: Self.get(authority, "/wait-forever")) }
            // The request must reach its handler first.
            // (Bounded so that a broken build fails rather than hangs: a minute of virtual time is far
        // beyond need.)
            _ = try await world.eventually { Self.startedHandlers.withLock { $0 } != 0 }
            try #require(Self.startedHandlers.withLock { $0 } == 1, "the request never reached its handler")
            waiting.cancel()
            await #expect(throws: NetworkError.cancelled) { _ = try await waiting.value }
            _ = try await world.eventually { Self.cancelledHandlers.withLock { $0 } != 0 }
            #expect(Self.cancelledHandlers.withLock { $0 } == 1, "the handler of the abandoned request was not cancelled")
        }
    }

    @Test(.timeLimit(.minutes(10))) func hundredConcurrentRequestsShareOneConnection() async throws {
        try await MemoryWorld.run { _ in
            let (listener, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let intact = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let size = 1000 + index * 37
                        let (body, response) = try await client.data(for: Self.get(authority, "/\(size)"))
                        return response.status == .ok && body == Self.pattern(size)
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(intact == 100)
            let connections = await listener.statistics?.connections
            #expect(connections == 1)
        }
    }

    /// `bytes(for:)`: the head first, then the body as it comes, byte-checked; a body dropped
    /// halfway cancels its request and the connection still serves.
    @Test(.timeLimit(.minutes(10))) func streamedResponse() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let count = 3 * 1024 * 1024
            let (body, response) = try await client.bytes(for: Self.get(authority, "/\(count)"))
            #expect(response.status == .ok)
            var received = Data()
            for try await chunk in body { received.append(chunk) }
            #expect(received == Self.pattern(count))
            do {
                let (abandoned, _) = try await client.bytes(for: Self.get(authority, "/\(count)"))
                var iterator = abandoned.makeAsyncIterator()
                _ = try await iterator.next()
            }
            let (hello, _) = try await client.data(for: Self.get(authority, "/hello"))
            #expect(hello == Data("hello, h3".utf8))
        }
    }

    /// Stopping the listener closes its connections with H3_NO_ERROR once the grace period
    /// has passed: a request still in flight then fails with the peer's close, not a timeout.
    @Test(.timeLimit(.minutes(10))) func listenerShutdownClosesWithNoError() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start(shutdownGracePeriod: .milliseconds(300))
            defer { client.close() }
            _ = try await client.data(for: Self.get(authority, "/hello"))
            let hanging = Task { try await client.data(for: Self.get(authority, "/hang")) }
            // The listener stops while the request waits on its handler.
            _ = try await world.eventually { Self.hangingHandlers.withLock { $0 } != 0 }
            try #require(Self.hangingHandlers.withLock { $0 } == 1, "the request never reached its handler")
            task.cancel()
            _ = try? await task.value
            do {
                _ = try await hanging.value
                Issue.record("the hanging request completed")
            } catch NetworkError.peerClosed(let code, _) {
                #expect(code == HTTP3ErrorCode.noError.code)
            } catch {
                Issue.record("expected the server's close with H3_NO_ERROR, got \(error)")
            }
        }
    }

    /// Stopping the listener lets a request it has taken finish (GOAWAY, then the close once
    /// the response is out), and `runHTTP3` returns after that.
    @Test(.timeLimit(.minutes(10))) func gracefulShutdownLetsRequestsFinish() async throws {
        try await MemoryWorld.run { world in
            let (_, task, client, authority) = try await Self.start()
            defer { client.close() }
            _ = try await client.data(for: Self.get(authority, "/hello"))
            let slow = Task { try await client.data(for: Self.get(authority, "/slow")) }
            _ = try await world.eventually { Self.slowHandlers.withLock { $0 } != 0 }
            try #require(Self.slowHandlers.withLock { $0 } == 1, "the request never reached its handler")
            task.cancel()
            let (body, response) = try await slow.value
            #expect(response.status == .ok)
            #expect(String(decoding: body, as: UTF8.self) == "finished")
            try await task.value
        }
    }

    /// A server that sends GOAWAY after every 50 requests while 100 are in flight at a time:
    /// all 600 complete, byte-checked, over new connections (requests the server refused are
    /// sent again), within the default 10 s grace period of each draining connection.
    @Test(.timeLimit(.minutes(10))) func goawayUnderLoadLosesNoRequest() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start(requestsPerConnection: 50)
            defer { task.cancel(); client.close() }
            let expected = Self.pattern(2000)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<600 {
                    if index >= 100 { try await group.next() }
                    group.addTask {
                        let (body, response) = try await client.data(for: Self.get(authority, "/2000"))
                        #expect(response.status == .ok)
                        #expect(body == expected)
                    }
                }
                try await group.waitForAll()
            }
            // At most about 50 requests per connection (a few more arrive in GOAWAY's first round trip).
            #expect(client.connectionsOpened >= 6, "\(client.connectionsOpened) connections for 600 requests")
        }
    }

    @Test(.timeLimit(.minutes(10))) func handlerErrorAnswers500() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let (body, response) = try await client.data(for: Self.get(authority, "/fail"))
            #expect(response.status == .internalServerError)
            #expect(body.isEmpty)
            // The connection still serves.
            let (hello, _) = try await client.data(for: Self.get(authority, "/hello"))
            #expect(hello == Data("hello, h3".utf8))
        }
    }

    @Test(.timeLimit(.minutes(10))) func responseLargerThanTheMaximumThrows() async throws {
        try await MemoryWorld.run { _ in
            let (_, task, _, authority) = try await Self.start()
            defer { task.cancel() }
            let client = HTTP3Client(quic: testClient(alpn: ["h3"]), maximumResponseBodySize: 1000)
            defer { client.close() }
            await #expect(throws: NetworkError.responseTooLarge(size: 5000, maximum: 1000)) {
                _ = try await client.data(for: Self.get(authority, "/5000"))
            }
        }
    }

    @Test(.timeLimit(.minutes(10))) func plainHTTPIsUnsupported() async throws {
        try await MemoryWorld.run { _ in
            let client = HTTP3Client()
            await #expect(throws: NetworkError.self) {
                _ = try await client.data(for: HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: "/"))
            }
        }
    }

    /// A request without `:method` and `:path` (RFC 9114 section 4.3.1: malformed) ends its
    /// stream with H3_MESSAGE_ERROR; the server keeps serving.
    @Test(.timeLimit(.minutes(10))) func malformedRequestEndsItsStreamWithMessageError() async throws {
        try await MemoryWorld.run { _ in
            let (listener, task, client, authority) = try await Self.start()
            defer { task.cancel(); client.close() }
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { testClient(alpn: ["h3"]) }
            defer { connection.cancel() }
            var uni: [QUIC.Stream<QUICStream>] = []
            for _ in 0..<3 { uni.append(try await connection.openStream(directionality: .unidirectional)) }
            let request = try await connection.openStream()
            // The engine encodes what it is given without checks, so it can write the bad request.
            let engine = try HTTP3Connection(role: .client, localStreams: HTTP3LocalStreams(
                control: uni[0].streamID, qpackEncoder: uni[1].streamID, qpackDecoder: uni[2].streamID))
            try engine.sendRequest(streamID: request.streamID, fields: [HTTP3Field(":scheme", "https"), HTTP3Field(":authority", authority)])
            let streams = Dictionary(uniqueKeysWithValues: (uni + [request]).map { ($0.streamID, $0) })
            while let write = engine.nextWrite() {
                try await streams[write.streamID]!.send(Data(write.bytes), endOfStream: write.fin)
            }
            await #expect(throws: NetworkError.streamReset(code: HTTP3ErrorCode.messageError.code)) {
                _ = try await request.receive(atLeast: 1, atMost: 1000)
            }
            let (hello, _) = try await client.data(for: Self.get(authority, "/hello"))
            #expect(hello == Data("hello, h3".utf8))
        }
    }
}

/// HTTP/3 over loopback where the subject is the server's threads: its loops answer requests
/// while Swift's global executor is held, which an in-memory world cannot show (its loop is
/// driven from that executor).
@Suite struct HTTP3GlobalExecutorTests {
    /// A new connection's requests are answered while Swift's global executor is busy: the
    /// server runs them on the connection's loop from the moment it accepts it. (They once
    /// waited for the listener's per-connection task, which starts on that executor: in full
    /// debug-build suite runs on 2 cores, seconds after the requests arrived, so a graceful
    /// shutdown's 10 s grace period could end before a handler had run.)
    @Test(.timeLimit(.minutes(10))) func requestsAreAnsweredWhileTheGlobalExecutorIsBusy() async throws {
        let (_, task, client, authority) = try await HTTP3ClientServerTests.start()
        defer { task.cancel(); client.close() }
        // The client's side runs on a thread of its own, so only the server could need the
        // global executor.
        let clientThread = DedicatedThreadExecutor(name: "test-h3-client")
        defer { clientThread.stop() }
        let answered = DispatchSemaphore(value: 0)
        let (request, answeredWhileHeld) = GlobalExecutorHold.whileHeld {
            let request = Task(executorPreference: clientThread) {
                defer { answered.signal() }
                return try await client.data(for: HTTP3ClientServerTests.get(authority, "/hello"))
            }
            // Bounded so that a failure ends (before QUIC's 30 s idle timeout would end the
            // connection); answered, it takes a handshake and a request's round trips.
            return (request, answered.wait(timeout: .now() + 20) == .success)
        }
        #expect(answeredWhileHeld, "the request was not answered while the global executor was busy")
        let (body, response) = try await request.value
        #expect(response.status == .ok)
        #expect(String(decoding: body, as: UTF8.self) == "hello, h3")
    }
}
