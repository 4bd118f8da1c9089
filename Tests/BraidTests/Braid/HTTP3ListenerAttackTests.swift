import BraidIO
import Foundation
import HTTPTypes
import Testing

@testable import Braid

/// An HTTP/3 listener (`runHTTP3`) under a slowloris (request streams whose header section
/// never ends) and under clients that never read the responses they asked for: what it holds
/// is bounded, and a legitimate client is served meanwhile.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HTTP3ListenerAttackTests {
    /// An HTTP/3 listener on 127.0.0.1: `/big` answers 64 MiB, written as the client reads;
    /// any other path answers "hello". Counts the requests its handler was called for.
    private static func start(
        configure: (QUIC) -> QUIC = { $0 }, bufferLimit: Int? = nil, handled: ManagedCounter
    ) async throws -> (listener: NetworkListener<QUIC>, task: Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            configure(QUIC(alpn: ["h3"]).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")))
        }
        if let bufferLimit { listener.connectionBufferLimit = bufferLimit }
        let task = Task {
            try await listener.runHTTP3 { request, _ in
                handled.increment()
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

    /// A QUIC client on ALPN h3 opens request streams (the listener allows 8 at once) and on
    /// each trickles a HEADERS frame that never ends, a field line every 200 ms. No handler
    /// runs for them, the client gets no ninth stream while they hold, and a legitimate client
    /// is served meanwhile; once the client goes quiet, the listener closes its connection at
    /// the idle timeout (10 s here: long enough that a loaded machine's pauses do not idle out
    /// the clients before that).
    @Test func requestsWhoseHeadersNeverEndRunNoHandlerAndHoldOnlyTheStreamLimit() async throws {
        let handled = ManagedCounter()
        let streamLimit = 8
        let server = try await Self.start(configure: { $0.initialMaxBidirectionalStreams(streamLimit).idleTimeout(10_000) }, handled: handled)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let hostile = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: server.listener.port!)) { testClient(alpn: ["h3"]) }
        defer { hostile.cancel() }

        // HEADERS (type 1) announcing 16,383 bytes; the field section's prefix (no dynamic
        // table); then, a byte at a time, "accept-encoding: gzip, deflate, br" (QPACK static
        // entry 31) again and again.
        let opening = Data([0x01, 0x7F, 0xFF, 0x00, 0x00])
        let opened = ManagedCounter()
        let trickling = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<(streamLimit + 4) {
                    group.addTask {
                        let stream = try await hostile.openStream()
                        opened.increment()
                        try await stream.send(opening)
                        while !Task.isCancelled {
                            // The trickle's pace, not a wait for an event.
                            try await Task.sleep(for: .milliseconds(200))
                            try await stream.send(Data([0xDF]))
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

/// Response bodies kept, never read, from any task.
private final class UnreadBodies: Sendable {
    private let bodies = Locked<[HTTP3IncomingBody]>([])
    func keep(_ body: HTTP3IncomingBody) { bodies.withLock { $0.append(body) } }
}
