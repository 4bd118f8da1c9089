import BraidCore
import BraidIO
import Testing

/// Lets a test hand loop-confined state to a virtual loop it drives itself on this thread.
private struct OnThisThread<Value>: @unchecked Sendable {
    let value: Value
}

extension EventLoop {
    /// A virtual loop: runs `body` on it now (on this thread) and everything it leads to.
    fileprivate func runNow(_ body: @escaping (LoopContext) -> Void) {
        let box = OnThisThread(value: body)
        execute { box.value($0) }
        runPending()
    }
}

/// What a channel told its owner.
private final class ChannelObserver: ConnectionChannelDelegate {
    private(set) var ready = false
    private(set) var ended: (any Error)?

    func channelBecameReady(_ channel: any ConnectionChannel) { ready = true }
    func channel(_ channel: any ConnectionChannel, endedWith error: any Error) { ended = error }
}

/// The byte-stream channel runs any `ByteStreamLayer`, not TLS alone: over in-memory sockets on
/// a virtual loop, with `RecordMaskingLayer` (a hello, masked records, an end record), it is
/// ready when the layer is, moves the stream through the layer both ways, ends it with the
/// layer's end, and fails with the layer's error or its handshake timeout.
@Suite(.ownThread, .timeLimit(.minutes(10))) struct ByteStreamLayerTests {
    private static let handshakeTimeout = Duration.seconds(5)

    private func virtualLoop() throws -> EventLoop {
        try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
    }

    private func channel(on loop: EventLoop, observer: ChannelObserver) -> ByteStreamChannel {
        let channel = ByteStreamChannel(
            loop: loop, sendLimit: 64 * 1024, receiveLimit: 64 * 1024, handshakeTimeout: Self.handshakeTimeout, describe: { $0 })
        channel.delegate = observer
        return channel
    }

    /// 30,000 bytes one way, ending the stream, and a reply the other way: each arrives whole
    /// with its end, the wire carries the layer's records (not the bytes as sent), and the
    /// channel reports the layer's facts.
    @Test func aLayerCarriesTheStreamBothWaysWithItsEnd() async throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        // Room for 4 KiB each way: the layer's output leaves in several writes.
        let (a, b) = MemoryStreamNetwork.pair(capacity: 4096)
        let clientObserver = ChannelObserver(), serverObserver = ChannelObserver()
        let client = channel(on: loop, observer: clientObserver), server = channel(on: loop, observer: serverObserver)
        loop.runNow { context in
            client.attach(socket: a, layer: RecordMaskingLayer(), context: context)
            server.attach(socket: b, layer: RecordMaskingLayer(), context: context)
        }
        #expect(clientObserver.ready && serverObserver.ready)
        #expect(client.facts.negotiatedALPN == "masked")

        let payload = (0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        guard case .accepted = client.outbox.offer(StreamBytes(copying: payload), endOfStream: true, idempotent: false) else {
            Issue.record("the client's outbox did not take the send")
            return
        }
        loop.runNow { context in client.pump(context) }
        let received = try await server.inbox.receive(.init(minimum: payload.count, maximum: payload.count, exact: true)) {}
        #expect(Array(received.content) == payload)
        #expect(received.endOfStream)
        // The hello, a two-byte header per record of at most 1 KiB, the masked bytes, the end record.
        let records = (payload.count + RecordMaskingLayer.largestRecord - 1) / RecordMaskingLayer.largestRecord
        #expect(a.counters.bytesSent == UInt64(1 + 2 * records + payload.count + 2))
        #expect(a.counters.sendmsgCalls > 1)

        let reply = Array("bye".utf8)
        guard case .accepted = server.outbox.offer(StreamBytes(copying: reply), endOfStream: true, idempotent: false) else {
            Issue.record("the server's outbox did not take the send")
            return
        }
        loop.runNow { context in server.pump(context) }
        let answered = try await client.inbox.receive(.init(minimum: reply.count, maximum: reply.count, exact: true)) {}
        #expect(Array(answered.content) == reply)
        #expect(answered.endOfStream)
        #expect(b.counters.bytesSent == UInt64(1 + RecordMaskingLayer.record(reply).count + 2))
        #expect(clientObserver.ended == nil && serverObserver.ended == nil)
        loop.runNow { context in
            client.cancel(context: context)
            server.cancel(context: context)
        }
    }

    /// The transport ends without the layer's end record: the bytes before it stay readable,
    /// then the connection fails with the layer's error (TLS's truncation).
    @Test func anEndWithoutTheLayersEndIsTheLayersError() async throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let (a, b) = MemoryStreamNetwork.pair(capacity: 4096)
        let observer = ChannelObserver()
        let server = channel(on: loop, observer: observer)
        let peer = ClosureHandler()
        loop.runNow { context in
            _ = try? a.register(peer, in: context)
            // The peer reads nothing (the loop would report it readable forever).
            a.setWantsReadable(false)
            server.attach(socket: b, layer: RecordMaskingLayer(), context: context)
            let sent = [RecordMaskingLayer.hello] + RecordMaskingLayer.record(Array("hi!".utf8))
            _ = try? sent.withUnsafeBytes { try a.write($0) }
            try? a.shutdownWrite()
        }
        #expect(observer.ready)
        #expect(observer.ended as? RecordMaskingLayer.Failure == .truncated)
        let first = try await server.inbox.receive(.init(minimum: 3, maximum: 3, exact: true)) {}
        #expect(Array(first.content) == Array("hi!".utf8))
        await #expect(throws: RecordMaskingLayer.Failure.truncated) {
            _ = try await server.inbox.receive(.init(minimum: 1, maximum: 1, exact: true)) {}
        }
    }

    /// A peer that never says hello: the channel fails once its handshake timeout has passed,
    /// having sent its own hello.
    @Test func aLayerThatNeverBecomesReadyTimesOut() throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let (a, b) = MemoryStreamNetwork.pair(capacity: 4096)
        let observer = ChannelObserver()
        let server = channel(on: loop, observer: observer)
        let peer = ClosureHandler()
        loop.runNow { context in
            _ = try? a.register(peer, in: context)
            // The peer reads nothing (the loop would report it readable forever).
            a.setWantsReadable(false)
            server.attach(socket: b, layer: RecordMaskingLayer(), context: context)
        }
        #expect(!observer.ready)
        #expect(b.counters.bytesSent == 1)
        loop.advance(by: Self.handshakeTimeout - .milliseconds(1))
        #expect(observer.ended == nil)
        loop.advance(by: .milliseconds(1))
        #expect(observer.ended as? ByteStreamError == .handshakeTimedOut(Self.handshakeTimeout))
    }
}
