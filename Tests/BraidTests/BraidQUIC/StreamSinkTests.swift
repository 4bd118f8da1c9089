import Testing
@testable import BraidQUIC

/// Streams whose received bytes go to a sink (`QUICStreamSink`) instead of the engine's buffer,
/// over the in-memory wire: every byte reaches the sink in order and the engine buffers none,
/// while the FIN, resets, STOP_SENDING, flow control and the readable signals behave as they
/// do for bytes in the engine's buffer.
@Suite(.ownThread) struct StreamSinkTests {
    /// Collects a stream's bytes as the engine hands them over; `take` plays the owner that
    /// publishes them to its reader.
    final class CollectingSink: QUICStreamSink {
        /// Received since the owner last took them.
        var unread: [UInt8] = []
        var taken: [UInt8] = []
        var discarded = 0

        func receive(_ bytes: UnsafeRawBufferPointer) { unread.append(contentsOf: bytes) }

        func discardUnread() -> Int {
            defer { unread.removeAll() }
            discarded += unread.count
            return unread.count
        }

        /// What an owner does at `streamReadable`: takes what arrived and asks the engine how
        /// the stream ended. Returns the bytes taken; `consume` returns their credit at once.
        @discardableResult
        func take(_ connection: QUICConnection, _ id: Int64, consume: Bool = true) throws -> (count: Int, fin: Bool) {
            let read = try connection.read(streamID: id, maxBytes: 0, returnsCredit: false) { _ in
                Issue.record("a stream with a sink had bytes in the engine's buffer")
            }
            let count = unread.count
            taken += unread
            unread.removeAll()
            if consume && count > 0 { connection.returnCredit(streamID: id, bytes: count) }
            return (count, read.fin)
        }
    }

    /// A client and a server connection, established, whose server gives every stream the
    /// client opens a `CollectingSink`.
    final class SinkRun {
        let network: SimulatedNetwork
        let source = StreamSource()
        let client: QUICConnection
        let server: QUICConnection
        var sinks: [Int64: CollectingSink] = [:]
        /// The application's handling of the server's events.
        var onServerEvent: (QUICEvent) -> Void = { _ in }

        init(server configure: (inout QUICServerConfiguration) -> Void = { _ in }) throws {
            network = SimulatedNetwork(server: try Fixtures.server(configure: configure))
            let client = try network.connect(Fixtures.client())
            #expect(network.run { client.isEstablished })
            self.client = client
            server = try #require(network.serverConnections.first)
            network.onEvent = { [unowned self] connection, event in
                if case .streamWritable = event { source.pump() }
                guard connection.role == .server else { return }
                onServerEvent(event)
            }
            network.onStep = { [source] in source.pump() }
            server.makeStreamSink = { [unowned self] id in
                let sink = CollectingSink()
                sinks[id] = sink
                return sink
            }
        }
    }

    @Test func everyByteGoesToTheSinkInOrderAndTheEngineBuffersNone() throws {
        let run = try SinkRun()
        var fins = 0
        var engineHeld = 0
        run.onServerEvent = { event in
            guard case .streamReadable(let id) = event, let sink = run.sinks[id] else { return }
            engineHeld = max(engineHeld, run.server.streams[id]?.receive.buffered ?? 0)
            #expect(run.server.readableBytes(streamID: id) == sink.unread.count)
            if (try? sink.take(run.server, id))?.fin == true { fins += 1 }
        }
        let id = try run.client.openStream(bidirectional: true)
        let payload = pattern(seed: 21, count: 3 * 1024 * 1024)
        run.source.enqueue(run.client, stream: id, bytes: payload)
        #expect(run.network.run(for: .seconds(120)) { fins > 0 })
        let sink = try #require(run.sinks[id])
        #expect(sink.taken == payload)
        #expect(fins == 1)
        #expect(engineHeld == 0)
        #expect(run.server.bufferedBytes == 0)
        // The FIN is reported once: the next read has nothing more to say.
        #expect((try? sink.take(run.server, id))?.fin != true)
    }

    /// The owner's sink holds what the peer sent until the owner consumes it, and the peer
    /// stops at the stream's window meanwhile; the readable signals are those of bytes in the
    /// engine's buffer: once, then once more at `promptReadThreshold`, then none until a read.
    @Test func anUnreadSinkHoldsAtMostTheWindowAndIsSignalledAsTheBufferWas() throws {
        let window: UInt64 = 256 * 1024
        let run = try SinkRun { $0.transport.initialMaxStreamDataBidirectionalRemote = window }
        var reading = false
        var finished = false
        var unreadAtSignals: [Int] = []
        run.onServerEvent = { event in
            guard case .streamReadable(let id) = event, let sink = run.sinks[id] else { return }
            if reading {
                if (try? sink.take(run.server, id))?.fin == true { finished = true }
            } else {
                unreadAtSignals.append(run.server.readableBytes(streamID: id))
            }
        }
        let id = try run.client.openStream(bidirectional: true)
        let payload = pattern(seed: 22, count: 2 * 1024 * 1024)
        run.source.enqueue(run.client, stream: id, bytes: payload)

        run.network.run(for: .seconds(10)) { false }
        let sink = try #require(run.sinks[id])
        #expect(sink.unread.count > 2 * QUICConnection.promptReadThreshold)
        #expect(UInt64(sink.unread.count) <= window, "the sink holds \(sink.unread.count) bytes with a \(window)-byte window")
        #expect(run.server.readableBytes(streamID: id) == sink.unread.count)
        #expect(unreadAtSignals.count == 2, "signalled with \(unreadAtSignals) bytes unread")
        #expect((unreadAtSignals.last ?? 0) >= QUICConnection.promptReadThreshold)
        #expect(!run.source.isDone)

        // Taking the bytes without consuming them returns no credit: the peer stays stopped.
        let held = sink.unread.count
        try sink.take(run.server, id, consume: false)
        run.network.run(for: .seconds(5)) { false }
        #expect(sink.unread.isEmpty && sink.taken.count == held, "the peer sent past its window")

        // Consumed, the credit goes back, and the rest arrives intact.
        reading = true
        run.server.returnCredit(streamID: id, bytes: held)
        #expect(run.network.run(for: .seconds(120)) { finished })
        #expect(sink.taken == payload)
    }

    /// A reset drops what the owner has not taken, gives its credit back to the connection (the
    /// next stream can use the whole connection window), and the owner's read reports it.
    @Test func aResetDropsTheUnreadBytesAndReturnsTheirConnectionCredit() throws {
        let connectionWindow = 512 * 1024
        let run = try SinkRun {
            $0.transport.initialMaxData = UInt64(connectionWindow)
            $0.transport.initialMaxStreamDataBidirectionalRemote = 1024 * 1024
        }
        let first = try run.client.openStream(bidirectional: true)
        run.source.enqueue(run.client, stream: first, bytes: pattern(seed: 23, count: 300 * 1024), fin: false)
        #expect(run.network.run { run.sinks[first]?.unread.count == 300 * 1024 })
        try run.client.resetStream(streamID: first, applicationErrorCode: 0x42)
        let sink = try #require(run.sinks[first])
        #expect(run.network.run { sink.discarded == 300 * 1024 })
        #expect(sink.unread.isEmpty)
        #expect(run.server.readableBytes(streamID: first) == 0)
        #expect(throws: QUICError.streamReset(streamID: first, code: 0x42)) { try sink.take(run.server, first) }

        // 300 KiB held by the first stream would leave the second 212 KiB of the window.
        var finished = false
        run.onServerEvent = { event in
            guard case .streamReadable(let id) = event, id != first, let sink = run.sinks[id] else { return }
            if (try? sink.take(run.server, id, consume: false))?.fin == true { finished = true }
        }
        let second = try run.client.openStream(bidirectional: true)
        let payload = pattern(seed: 24, count: connectionWindow - 1024)
        run.source.enqueue(run.client, stream: second, bytes: payload)
        #expect(run.network.run(for: .seconds(30)) { finished })
        #expect(run.sinks[second]?.taken == payload)
    }

    /// STOP_SENDING drops what the owner has not taken and returns its credit, as for bytes in
    /// the engine's buffer.
    @Test func stopSendingDropsTheUnreadBytesAndReturnsTheirCredit() throws {
        let connectionWindow = 512 * 1024
        let run = try SinkRun {
            $0.transport.initialMaxData = UInt64(connectionWindow)
            $0.transport.initialMaxStreamDataBidirectionalRemote = 1024 * 1024
        }
        let first = try run.client.openStream(bidirectional: true)
        run.source.enqueue(run.client, stream: first, bytes: pattern(seed: 25, count: 300 * 1024), fin: false)
        #expect(run.network.run { run.sinks[first]?.unread.count == 300 * 1024 })
        try run.server.stopSending(streamID: first, applicationErrorCode: 7)
        let sink = try #require(run.sinks[first])
        #expect(sink.discarded == 300 * 1024 && sink.unread.isEmpty)
        #expect(run.server.readableBytes(streamID: first) == 0)

        var finished = false
        run.onServerEvent = { event in
            guard case .streamReadable(let id) = event, id != first, let sink = run.sinks[id] else { return }
            if (try? sink.take(run.server, id, consume: false))?.fin == true { finished = true }
        }
        let second = try run.client.openStream(bidirectional: true)
        let payload = pattern(seed: 26, count: connectionWindow - 1024)
        run.source.enqueue(run.client, stream: second, bytes: payload)
        #expect(run.network.run(for: .seconds(30)) { finished })
        #expect(run.sinks[second]?.taken == payload)
    }

    /// A sink installed on a stream that already has bytes in the engine (they came before its
    /// owner existed) gets those first, in order, and everything after.
    @Test func anInstalledSinkGetsTheBytesTheEngineHeldFirst() throws {
        let run = try SinkRun()
        run.server.makeStreamSink = nil
        let id = try run.client.openStream(bidirectional: true)
        let payload = pattern(seed: 27, count: 200 * 1024)
        try run.client.send(streamID: id, bytes: payload[..<3000])
        #expect(run.network.run { run.server.readableBytes(streamID: id) == 3000 })
        #expect(run.server.streams[id]?.receive.buffered == 3000)

        let sink = CollectingSink()
        run.server.installSink(sink, streamID: id)
        #expect(sink.unread == Array(payload[..<3000]))
        #expect(run.server.streams[id]?.receive.buffered == 0)
        #expect(run.server.readableBytes(streamID: id) == 3000)

        var finished = false
        run.onServerEvent = { event in
            guard case .streamReadable(id) = event else { return }
            if (try? sink.take(run.server, id))?.fin == true { finished = true }
        }
        run.source.enqueue(run.client, stream: id, bytes: Array(payload[3000...]))
        #expect(run.network.run(for: .seconds(30)) { finished })
        #expect(sink.taken == payload)
    }

    /// A stream we open with a sink gets the peer's bytes there (the client's side of a
    /// bidirectional stream the server answers on).
    @Test func aStreamOpenedWithASinkGetsThePeersBytes() throws {
        let run = try SinkRun()
        let clientSink = CollectingSink()
        var finished = false
        let serverSource = StreamSource()
        run.onServerEvent = { event in
            guard case .streamReadable(let id) = event, let sink = run.sinks[id] else { return }
            // The server answers once the request is in.
            if (try? sink.take(run.server, id))?.fin == true {
                serverSource.enqueue(run.server, stream: id, bytes: pattern(seed: 29, count: 500 * 1024))
            }
        }
        let previous = run.network.onEvent
        run.network.onEvent = { connection, event in
            previous(connection, event)
            if case .streamWritable = event { serverSource.pump() }
            if connection.role == .client, case .streamReadable(let id) = event {
                if (try? clientSink.take(connection, id))?.fin == true { finished = true }
            }
        }
        run.network.onStep = { [source = run.source] in
            source.pump()
            serverSource.pump()
        }
        let id = try run.client.openStream(bidirectional: true, sink: clientSink)
        run.source.enqueue(run.client, stream: id, bytes: pattern(seed: 28, count: 1000))
        #expect(run.network.run(for: .seconds(30)) { finished })
        #expect(clientSink.taken == pattern(seed: 29, count: 500 * 1024))
        #expect(run.client.streams[id]?.receive.buffered ?? 0 == 0)
    }
}
