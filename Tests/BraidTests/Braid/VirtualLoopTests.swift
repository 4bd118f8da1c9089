import BraidIO
import BraidQUIC
import BraidQUICIO
import Foundation
import Synchronization
import Testing

@testable import Braid

/// The public API on a virtual event loop, without sockets (`VirtualPair`): connections,
/// streams and datagrams as a user calls them, with the test moving time. What needs a real
/// socket (establishment, migration, batching) stays in the loopback suites.
@Suite struct VirtualLoopTests {
    /// A stream echo through the public facades; the handshake and the exchange take the
    /// wire's round trips of virtual time, not of the wall clock.
    @Test(.timeLimit(.minutes(10))) func streamEchoOnAVirtualLoop() async throws {
        let pair = try VirtualPair(delay: .milliseconds(25))
        let client = pair.client
        let started = pair.loop.virtualNow!
        let reply = try await pair.run {
            let stream = try await client.openStream()
            try await stream.send(Data("hello, virtual".utf8), endOfStream: true)
            return try await stream.receive(atLeast: 1, atMost: 100)
        } serving: { server in
            try await server.inboundStreams { stream in
                let (request, _) = try await stream.receive(atLeast: 1, atMost: 100)
                try await stream.send(request, endOfStream: true)
            }
        }
        #expect(reply.content == Data("hello, virtual".utf8))
        #expect(reply.metadata.isEndOfStream)
        #expect(client.state == .ready)
        #expect(client.negotiatedALPN == "echo")
        // A 1-RTT handshake, then the request and its answer: at least two round trips.
        #expect(pair.loop.virtualNow! - started >= .milliseconds(100))
    }

    /// A server that reads nothing: the client's sends stop once the stream's window and send
    /// bound are full; once the server reads, every byte arrives, in order.
    @Test(.timeLimit(.minutes(10))) func aReaderThatDoesNotReadStopsTheSender() async throws {
        let pair = try VirtualPair()
        let client = pair.client
        let piece = 1 << 20, pieces = 40
        let sent = Atomic(0)
        let stream = try await pair.run { try await client.openStream() }
        let sending = Task {
            for index in 0..<pieces {
                try await stream.send(Data(repeating: UInt8(index), count: piece), endOfStream: index == pieces - 1)
                sent.add(1, ordering: .relaxed)
            }
        }
        // Ten seconds of virtual time (at least a second of wall time, for the sender to run)
        // with nobody reading on the server.
        for _ in 0..<2000 {
            pair.advance(by: .milliseconds(5))
            try await Task.sleep(for: .microseconds(500))
        }
        let sentWhileStalled = sent.load(ordering: .relaxed)
        // The received bytes wait in the server's stream with their credit withheld: the peer's
        // stream window (auto-tuned up to 16 MiB) plus the 1 MiB send bound is all that moves,
        // and the sender is suspended in its next send.
        #expect(sentWhileStalled >= 1 && sentWhileStalled <= 18, "\(sentWhileStalled) MiB sent to a reader that reads nothing")
        #expect(stream.end.outbox.waitingSenders == 1)
        let server = try #require(pair.server)
        let received = try await pair.run(limit: .seconds(60)) {
            var total = 0, intact = true
            for await inbound in Self.streams(of: server) {
                while true {
                    let (content, metadata) = try await inbound.receive(atLeast: 1, atMost: piece)
                    let start = total
                    content.withUnsafeBytes { bytes in
                        for offset in 0..<bytes.count where bytes[offset] != UInt8((start + offset) / piece) { intact = false }
                    }
                    total += content.count
                    if metadata.isEndOfStream { return (total, intact) }
                }
            }
            return (total, intact)
        }
        try await sending.value
        #expect(received.0 == piece * pieces)
        #expect(received.1)
    }

    /// Cancelling the client fails its pending receive with `cancelled`; the server's
    /// connection ends with the client's close (application code 0).
    @Test(.timeLimit(.minutes(10))) func cancellingFailsPendingCallsAndClosesThePeer() async throws {
        let pair = try VirtualPair()
        let client = pair.client
        let stream = try await pair.run {
            let stream = try await client.openStream()
            try await stream.send(Data([1]))
            return stream
        }
        let receiving = Task { try await stream.receive(atLeast: 1, atMost: 10) }
        while pair.server == nil { pair.advance(by: .milliseconds(1)) }
        pair.advance(by: .milliseconds(50))
        client.cancel()
        pair.advance(by: .milliseconds(100))
        await #expect(throws: NetworkError.cancelled) { try await receiving.value }
        await #expect(throws: NetworkError.cancelled) { try await stream.send(Data([2])) }
        #expect(client.state == .cancelled)
        let server = try #require(pair.server)
        #expect(server.state == .failed(.peerClosed(code: 0, reason: "")))
    }

    /// Datagrams both ways on the virtual loop, through the outbox and the inbox.
    @Test(.timeLimit(.minutes(10))) func datagramsOnAVirtualLoop() async throws {
        let pair = try VirtualPair()
        let client = pair.client
        let echoed = try await pair.run {
            for number in 0..<20 { try await client.datagrams.send(Data([UInt8(number)])) }
            var seen = Set<UInt8>()
            for await datagram in client.datagrams {
                seen.insert(datagram[0])
                if seen.count == 20 { break }
            }
            return seen
        } serving: { server in
            for await datagram in server.datagrams { try await server.datagrams.send(datagram) }
        }
        #expect(echoed == Set(0..<20))
    }

    /// The server connection's inbound streams as an async sequence.
    private static func streams(of server: NetworkConnection<QUIC>) -> AsyncMapSequence<AsyncStream<QUICStreamHandle>, QUIC.Stream<QUICStream>> {
        server.shared.quic.inboundStreams.map { QUIC.Stream($0, stack: QUICStream()) }
    }
}

extension VirtualPair {
    /// Like `run`, with `serving` running on the server's connection (once it exists) alongside.
    func run<T: Sendable>(
        limit: Duration = .seconds(20), _ body: @escaping @Sendable () async throws -> T,
        serving: @escaping @Sendable (NetworkConnection<QUIC>) async throws -> Void
    ) async throws -> T {
        let serverTask = SharedSlot<Task<Void, any Error>>()
        defer { serverTask.value?.cancel() }
        return try await run(limit: limit) { [self] in
            let work = Task { try await body() }
            while server == nil { await Task.yield() }
            let server = server!
            serverTask.value = Task { try await serving(server) }
            return try await work.value
        }
    }
}
