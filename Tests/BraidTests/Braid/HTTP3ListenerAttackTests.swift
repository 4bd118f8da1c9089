import BraidHTTP3
import BraidIO
import Foundation
import HTTPTypes
import Testing

@testable import Braid

/// An HTTP/3 listener (`runHTTP3`) under a slowloris (request streams whose header section
/// never ends, held to the header deadline and counted in the buffer limit) and under clients
/// that never read the responses they asked for: what it holds is bounded, and a legitimate
/// client is served meanwhile.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HTTP3ListenerAttackTests {
    /// An HTTP/3 listener on 127.0.0.1: `/big` answers 64 MiB, written as the client reads;
    /// `/hold` reads none of its request body and waits until the request or the listener
    /// ends; any other path answers "hello". Counts the requests its handler was called for.
    private static func start(
        configure: (QUIC) -> QUIC = { $0 }, bufferLimit: Int? = nil, requestHeaderTimeout: Duration? = .seconds(10), handled: ManagedCounter
    ) async throws -> (listener: NetworkListener<QUIC>, task: Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            configure(QUIC(alpn: ["h3"]).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")))
        }
        if let bufferLimit { listener.connectionBufferLimit = bufferLimit }
        let task = Task {
            try await listener.runHTTP3(requestHeaderTimeout: requestHeaderTimeout) { request, _ in
                handled.increment()
                if request.path == "/hold" { try await Task.sleep(for: .seconds(3600)) }
                guard request.path == "/big" else { return (HTTPResponse(status: .ok), .data(Data("hello".utf8))) }
                return (HTTPResponse(status: .ok), .stream { writer in
                    let chunk = Data(repeating: 0x5A, count: 64 << 10)
                    for _ in 0..<1024 { try await writer.write(chunk) }
                })
            }
        }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    private static func get(_ path: String, port: UInt16) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "https", authority: "localhost:\(port)", path: path)
    }

    /// HEADERS (type 1) announcing 16,383 bytes; the field section's prefix (no dynamic table).
    /// Sent, then "accept-encoding: gzip, deflate, br" (QPACK static entry 31, `trickledField`)
    /// again and again, the section never ends.
    private static let neverEndingHeaders = Data([0x01, 0x7F, 0xFF, 0x00, 0x00])
    private static let trickledField = Data([0xDF])

    /// A QUIC client on ALPN h3 opens request streams (the listener allows 8 at once) and on
    /// each trickles a HEADERS frame that never ends, a field line every 200 ms, to a listener
    /// without a header deadline (`requestHeaderTimeout: nil`). No handler runs for them, the
    /// client gets no ninth stream while they hold, and a legitimate client is served
    /// meanwhile; once the client goes quiet, the listener closes its connection at the idle
    /// timeout (10 s here: long enough that a loaded machine's pauses do not idle out the
    /// clients before that).
    @Test func requestsWhoseHeadersNeverEndRunNoHandlerAndHoldOnlyTheStreamLimit() async throws {
        let handled = ManagedCounter()
        let streamLimit = 8
        let server = try await Self.start(
            configure: { $0.initialMaxBidirectionalStreams(streamLimit).idleTimeout(10_000) }, requestHeaderTimeout: nil, handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let hostile = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: server.listener.port!)) { testClient(alpn: ["h3"]) }
        defer { hostile.cancel() }

        let opened = ManagedCounter()
        let trickling = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<(streamLimit + 4) {
                    group.addTask {
                        let stream = try await hostile.openStream()
                        opened.increment()
                        try await stream.send(Self.neverEndingHeaders)
                        while !Task.isCancelled {
                            // The trickle's pace, not a wait for an event.
                            try await Task.sleep(for: .milliseconds(200))
                            try await stream.send(Self.trickledField)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { trickling.cancel() }
        let deadline = ContinuousClock.now + .seconds(60)
        while opened.value < streamLimit && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(opened.value == streamLimit)

        // Served while they trickle (its PINGs keep it from the idle timeout).
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]).keepAlive(.seconds(1)))
        let (body, response) = try await client.data(for: Self.get("/5", port: port))
        #expect(response.status == .ok && body == Data("hello".utf8))
        client.close()
        // The trickled requests never reached a handler, and took no stream past the limit
        // (a stream's credit would come back only if one of them ended).
        #expect(handled.value == 1, "\(handled.value) handlers ran")
        #expect(opened.value == streamLimit, "\(opened.value) streams opened")
        let during = try #require(await server.listener.statistics)
        #expect(during.connections >= 1, "\(during)")

        // Quiet now: closed at the idle timeout (a bounded wait, nothing timed).
        trickling.cancel()
        let quiet = ContinuousClock.now + .seconds(90)
        var after = during
        while after.connections > 0 && ContinuousClock.now < quiet {
            try await Task.sleep(for: .milliseconds(100))
            after = try #require(await server.listener.statistics)
        }
        #expect(after.connections == 0 && after.streams == 0, "\(after)")
        #expect(handled.value == 1, "\(handled.value) handlers ran")
    }

    /// The same slowloris against a listener with a 2 s header deadline, and an idle timeout
    /// (60 s) the trickle would hold off anyway: each trickled stream is refused at its
    /// deadline, the server stopping and resetting it with H3_REQUEST_REJECTED, having run no
    /// handler; the streams' credit comes back, so the client opens its four further streams on
    /// the same connection (refused in turn). A legitimate client is served meanwhile.
    @Test func requestsWhoseHeadersDoNotArriveInTimeAreRefusedAtTheDeadline() async throws {
        let handled = ManagedCounter()
        let streamLimit = 8
        let streamCount = streamLimit + 4
        let server = try await Self.start(
            configure: { $0.initialMaxBidirectionalStreams(streamLimit).idleTimeout(60_000) }, requestHeaderTimeout: .seconds(2), handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let hostile = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: server.listener.port!)) { testClient(alpn: ["h3"]) }
        defer { hostile.cancel() }

        let opened = ManagedCounter()
        // How each stream ended, as the client saw it.
        let outcomes = StreamOutcomes()
        let trickling = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<streamCount {
                    group.addTask {
                        // Waits for a stream while the first eight hold the limit.
                        let stream = try await hostile.openStream()
                        opened.increment()
                        try await stream.send(Self.neverEndingHeaders)
                        let trickle = Task {
                            while !Task.isCancelled {
                                // The trickle's pace, not a wait for an event.
                                try await Task.sleep(for: .milliseconds(200))
                                try await stream.send(Self.trickledField)
                            }
                        }
                        defer { trickle.cancel() }
                        let outcome: String
                        do {
                            let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1024)
                            outcome = "received \(content.count) bytes, end of stream: \(metadata.isEndOfStream)"
                        } catch {
                            outcome = "\(error)"
                        }
                        outcomes.add(outcome)
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { trickling.cancel() }
        let deadline = ContinuousClock.now + .seconds(90)
        while opened.value < streamLimit && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(opened.value >= streamLimit)

        // Served during the attack.
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { client.close() }
        let (body, response) = try await client.data(for: Self.get("/5", port: port))
        #expect(response.status == .ok && body == Data("hello".utf8))

        while outcomes.all.count < streamCount && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let refused = "\(NetworkError.streamReset(code: HTTP3ErrorCode.requestRejected.code))"
        let seen = outcomes.all
        #expect(seen.count == streamCount && seen.allSatisfy { $0 == refused }, "\(seen)")
        // The client opened its further streams as the refused ones gave their credit back.
        #expect(opened.value == streamCount, "\(opened.value) streams opened")
        #expect(handled.value == 1, "\(handled.value) handlers ran")
        // The hostile connection itself is still open: only its requests were refused.
        let after = try #require(await server.listener.statistics)
        #expect(after.connections >= 1, "\(after)")
        // Every stream's task ended with its outcome (a failure to open or send would show).
        if seen.count == streamCount { try await trickling.value }
    }

    /// A QUIC client on ALPN h3 fills the QPACK dynamic table with one 4,000-byte field, then
    /// opens 32 request streams and on each sends a HEADERS frame that never ends, referring to
    /// that field 15 times (a byte each): the listener (no header deadline here) holds 60 KiB of
    /// decoded fields per stream, which its buffer budget counts, though the client sent a few
    /// hundred bytes of them (the windows' share of the budget stays small: the streams' windows
    /// are 4 KiB, and the bytes that arrive are credited back at once, far below the half
    /// window that makes a window grow). A legitimate client is served meanwhile.
    @Test func headerSectionsInProgressCountAgainstTheBufferLimit() async throws {
        let handled = ManagedCounter()
        let streamCount = 32
        let server = try await Self.start(
            configure: { $0.initialMaxBidirectionalStreams(streamCount).initialMaxStreamDataBidirectionalRemote(4 << 10).idleTimeout(60_000) },
            requestHeaderTimeout: nil, handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let budget = try #require(server.listener.bufferBudget.withLock { $0 })
        let hostile = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: server.listener.port!)) { testClient(alpn: ["h3"]) }
        defer { hostile.cancel() }

        // The QPACK encoder stream (type 0x02): Set Dynamic Table Capacity 4,096, then Insert
        // With Literal Name "x-pad" and a 4,000-byte value (RFC 9204 section 4.3).
        let value = 4000
        let encoder = try await hostile.openStream(directionality: .unidirectional)
        try await encoder.send(
            Data([0x02] + Self.qpackInteger(4096, prefixBits: 5, flags: 0x20) + Self.qpackInteger(5, prefixBits: 5, flags: 0x40) + Array("x-pad".utf8)
                + Self.qpackInteger(value, prefixBits: 7, flags: 0x00) + [UInt8](repeating: 0x61, count: value)))
        // HEADERS announcing 16,383 bytes; the prefix: Required Insert Count 1 (encoded as 2,
        // with 128 entries at most), Base 1; then the dynamic entry (relative index 0), 15 times.
        let references = 15
        let headers = Data([0x01, 0x7F, 0xFF, 0x02, 0x00] + [UInt8](repeating: 0x80, count: references))
        var streams: [QUIC.Stream<QUICStream>] = []
        for _ in 0..<streamCount {
            let stream = try await hostile.openStream()
            try await stream.send(headers)
            streams.append(stream)
        }
        // Name + value + 32 per field, as the engine counts them.
        let held = streamCount * references * (5 + value + 32)
        let deadline = ContinuousClock.now + .seconds(90)
        while budget.peak < held && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(budget.peak >= held, "peak \(budget.peak), fields held \(held)")

        // Served while they hold.
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { client.close() }
        #expect(try await client.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))
        #expect(handled.value == 1, "\(handled.value) handlers ran")
        print("HTTP/3 header sections held: \(streamCount) streams, \(held) bytes of fields; budget peak \(budget.peak) bytes, now \(budget.buffered)")
    }

    /// Sixteen uploads of 256 KiB to a handler that never reads its request body: each
    /// stream's body bytes wait for the handler in its exchange, up to the stream's window
    /// (64 KiB; the connection's is large enough for all sixteen), and the listener's buffer
    /// budget counts them, though QUIC has handed them over. A legitimate client is served
    /// meanwhile.
    @Test func requestBodiesAHandlerHasNotReadCountAgainstTheBufferLimit() async throws {
        let handled = ManagedCounter()
        let window = 64 << 10, uploads = 16
        let server = try await Self.start(
            configure: { $0.initialMaxStreamDataBidirectionalRemote(window).initialMaxData(4 << 20) }, handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let budget = try #require(server.listener.bufferBudget.withLock { $0 })

        let uploader = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { uploader.close() }
        let body = Data(repeating: 0x42, count: 256 << 10)
        let request = HTTPRequest(method: .post, scheme: "https", authority: "localhost:\(port)", path: "/hold")
        let sending = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<uploads { group.addTask { _ = try await uploader.upload(for: request, from: body) } }
                try await group.waitForAll()
            }
        }
        defer { sending.cancel() }

        // Each stream's window, less its request's head and frame headers (well under 4 KiB).
        let held = uploads * (window - 4096)
        let deadline = ContinuousClock.now + .seconds(90)
        while (budget.peak < held || handled.value < uploads) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(budget.peak >= held, "peak \(budget.peak), bodies held at least \(held)")
        #expect(handled.value == uploads, "\(handled.value) handlers ran")

        // Served while they hold.
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { client.close() }
        #expect(try await client.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))
        print("HTTP/3 unread request bodies: \(uploads) streams of \(window >> 10) KiB windows; budget peak \(budget.peak) bytes, now \(budget.buffered)")
    }

    /// `runHTTP3` refuses a header deadline that is not positive, before it binds.
    @Test func aHeaderDeadlineThatIsNotPositiveIsRefused() async throws {
        for timeout in [Duration.zero, .seconds(-1)] {
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
                QUIC(alpn: ["h3"]).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
            }
            await #expect {
                try await listener.runHTTP3(requestHeaderTimeout: timeout) { _, _ in (HTTPResponse(status: .ok), .data(Data())) }
            } throws: { error in
                guard case NetworkError.invalidConfiguration(let message) = error else { return false }
                return message.contains("requestHeaderTimeout must be positive")
            }
        }
    }

    /// An integer with an N-bit prefix (RFC 9204 section 4.1.1), `flags` in the first byte's
    /// other bits.
    private static func qpackInteger(_ value: Int, prefixBits: Int, flags: UInt8) -> [UInt8] {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else { return [flags | UInt8(value)] }
        var bytes = [flags | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            bytes.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
        return bytes
    }

    /// A client asks for 64 MiB on each of twelve requests and never reads a byte of the
    /// bodies: the listener's connection holds what the client's windows stop, past the
    /// listener's buffer limit (2 MiB), and the listener closes it. A client connected before
    /// is served while it holds and after; so is a new one.
    @Test func aClientThatNeverReadsItsResponsesIsClosedAtTheBufferLimit() async throws {
        let handled = ManagedCounter()
        let limit = 2 << 20
        let server = try await Self.start(bufferLimit: limit, handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let budget = try #require(server.listener.bufferBudget.withLock { $0 })

        let reader = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { reader.close() }
        #expect(try await reader.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))

        let hostile = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { hostile.close() }
        // The bodies are never iterated: their credit never goes back to the listener.
        let unread = UnreadBodies()
        let asking = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        let (body, _) = try await hostile.bytes(for: Self.get("/big", port: port))
                        unread.keep(body)
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { asking.cancel() }

        let deadline = ContinuousClock.now + .seconds(90)
        while budget.buffered < limit && budget.closedConnections == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit)")
        // Served while the other connection holds its bytes (or as the listener closes it).
        #expect(try await reader.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))

        while (budget.closedConnections == 0 || budget.buffered >= limit) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        #expect(try await reader.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))
        // A new client: refused only while the listener is at its limit, so asked again until
        // it is served.
        let served = ContinuousClock.now + .seconds(90)
        while true {
            let after = HTTP3Client(quic: testClient(alpn: ["h3"]))
            defer { after.close() }
            do {
                #expect(try await after.data(for: Self.get("/5", port: port)).0 == Data("hello".utf8))
                break
            } catch NetworkError.serverBusy(_, _) where ContinuousClock.now < served {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        print("HTTP/3 unread responses, limit \(limit >> 20) MiB: budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections)")
    }
}

/// How streams ended, recorded from any task.
private final class StreamOutcomes: Sendable {
    private let list = Locked<[String]>([])
    func add(_ outcome: String) { list.withLock { $0.append(outcome) } }
    var all: [String] { list.withLock { $0 } }
}

/// Response bodies kept, never read, from any task.
private final class UnreadBodies: Sendable {
    private let bodies = Locked<[HTTP3IncomingBody]>([])
    func keep(_ body: HTTP3IncomingBody) { bodies.withLock { $0.append(body) } }
}
