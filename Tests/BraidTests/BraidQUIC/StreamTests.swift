import Testing
@testable import BraidQUIC

/// Stream transfer over the in-memory wire: integrity, concurrency, loss, corruption, resets,
/// and flow control.
@Suite(.ownThread) struct StreamTests {
    /// A client that echoes through an `EchoServer` and collects what comes back.
    final class EchoRun {
        let network: SimulatedNetwork
        let echo = EchoServer()
        let clientSink = StreamSink()
        let clientSource = StreamSource()
        var established: [QUICConnection] = []

        init(seed: UInt64 = 1, conditions: LinkConditions = LinkConditions(),
             server configure: (inout QUICServerConfiguration) -> Void = { _ in }) throws {
            network = SimulatedNetwork(seed: seed, server: try Fixtures.server(configure: configure))
            network.conditions = conditions
            network.onEvent = { [echo, clientSink, clientSource] connection, event in
                echo.handle(connection, event)
                guard connection.role == .client else { return }
                switch event {
                case .streamReadable(let id): clientSink.drain(connection, stream: id)
                case .streamWritable: clientSource.pump()
                default: break
                }
            }
            network.onStep = { [echo, clientSource] in
                echo.source.pump()
                clientSource.pump()
            }
        }

        /// Opens a bidirectional stream and starts sending `payload` (with FIN) to be echoed.
        func startEcho(_ client: QUICConnection, payload: [UInt8]) throws -> Int64 {
            let id = try client.openStream(bidirectional: true)
            clientSource.enqueue(client, stream: id, bytes: payload)
            return id
        }

        func connect(_ context: QUICClientContext) throws -> QUICConnection {
            let client = try network.connect(context)
            #expect(network.run { client.isEstablished || client.isClosed })
            #expect(client.isEstablished, "handshake failed: \(String(describing: client.closeReason))")
            return client
        }
    }

    @Test func tenMegabytesOnOneStreamArriveIdentical() throws {
        let run = try EchoRun()
        let client = try run.connect(Fixtures.client())
        let payload = pattern(seed: 7, count: 10 * 1024 * 1024)
        let id = try run.startEcho(client, payload: payload)
        #expect(run.network.run(for: .seconds(120)) { run.clientSink.isFinished(client, id) })
        let echoed = run.clientSink.bytes(client, id)
        #expect(echoed.count == payload.count)
        #expect(echoed == payload)
        // The server saw exactly the payload too (not only the echo).
        let serverSide = run.network.serverConnections.first!
        #expect(run.echo.sink.bytes(serverSide, id) == payload)
    }

    @Test func thousandConcurrentStreamsArriveIntact() throws {
        let run = try EchoRun { $0.transport.initialMaxBidirectionalStreams = 1000 }
        let client = try run.connect(Fixtures.client())
        var expected: [Int64: [UInt8]] = [:]
        for index in 0..<1000 {
            let id = try client.openStream(bidirectional: true)
            let bytes = pattern(seed: UInt64(index), count: 100 + index * 7 % 3000)
            expected[id] = bytes
            run.clientSource.enqueue(client, stream: id, bytes: bytes)
        }
        #expect(run.network.run(for: .seconds(120)) { expected.keys.allSatisfy { run.clientSink.isFinished(client, $0) } })
        for (id, bytes) in expected {
            #expect(run.clientSink.bytes(client, id) == bytes, "stream \(id)")
        }
    }

    @Test func transferUnderLossAndReorderingCompletesIntact() throws {
        var conditions = LinkConditions()
        conditions.dropRate = 0.05
        conditions.jitter = .milliseconds(8)
        let run = try EchoRun(seed: 42, conditions: conditions)
        let client = try run.connect(Fixtures.client())
        let payload = pattern(seed: 9, count: 2 * 1024 * 1024)
        let id = try run.startEcho(client, payload: payload)
        #expect(run.network.run(for: .seconds(300)) { run.clientSink.isFinished(client, id) })
        #expect(run.clientSink.bytes(client, id) == payload)
        #expect(run.network.droppedToServer > 0 && run.network.droppedToClients > 0)
    }

    @Test func corruptedAndDuplicatedDatagramsAreDiscardedWithoutHarm() throws {
        var conditions = LinkConditions()
        conditions.corruptRate = 0.05
        conditions.duplicateRate = 0.05
        let run = try EchoRun(seed: 3, conditions: conditions)
        let client = try run.connect(Fixtures.client())
        let payload = pattern(seed: 11, count: 1024 * 1024)
        let id = try run.startEcho(client, payload: payload)
        #expect(run.network.run(for: .seconds(300)) { run.clientSink.isFinished(client, id) })
        #expect(run.clientSink.bytes(client, id) == payload)
        #expect(client.isEstablished)
    }

    @Test func resetDeliversCodeToReaderAndStopSendingReachesSender() throws {
        let run = try EchoRun()
        let client = try run.connect(Fixtures.client())
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: pattern(seed: 1, count: 5000))
        run.network.run { run.network.serverConnections.first.map { run.echo.sink.bytes($0, id).count == 5000 } ?? false }
        try client.resetStream(streamID: id, applicationErrorCode: 0x42)
        let server = run.network.serverConnections.first!
        #expect(run.network.run { run.echo.sink.resets[ObjectIdentifier(server)]?[id] != nil })
        #expect(run.echo.sink.resets[ObjectIdentifier(server)]?[id] == 0x42)

        // STOP_SENDING from the server on a second stream.
        var stopCode: UInt64?
        let previous = run.network.onEvent
        run.network.onEvent = { connection, event in
            if case .streamStopSending(_, let code?) = event, connection.role == .client { stopCode = code }
            else { previous(connection, event) }
        }
        let second = try client.openStream(bidirectional: true)
        try client.send(streamID: second, bytes: [1, 2, 3])
        run.network.run { server.readableBytes(streamID: second) > 0 || run.echo.sink.bytes(server, second).count > 0 }
        try server.stopSending(streamID: second, applicationErrorCode: 7)
        // The server finishes its own direction too, so the stream closes and ngtcp2 0.12.1
        // reports the STOP_SENDING code.
        try server.send(streamID: second, bytes: [UInt8](), fin: true)
        #expect(run.network.run { stopCode != nil })
        #expect(stopCode == 7)
        #expect(throws: QUICError.self) { try client.send(streamID: second, bytes: [4]) }
    }

    @Test func slowReaderCapsSenderAtFlowControlWindow() throws {
        let window: UInt64 = 256 * 1024
        let network = SimulatedNetwork(server: try Fixtures.server { $0.transport.initialMaxStreamDataBidirectionalRemote = window })
        let source = StreamSource()
        var serverSide: QUICConnection?
        var reading = false
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server { serverSide = connection }
            if case .streamWritable = event { source.pump() }
            if reading, connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        network.onStep = { source.pump() }
        let client = try network.connect(Fixtures.client())
        network.run { client.isEstablished }
        let id = try client.openStream(bidirectional: true)
        let payload = pattern(seed: 5, count: 8 * 1024 * 1024)
        source.enqueue(client, stream: id, bytes: payload)

        // Nobody reads on the server for 10 s of virtual time.
        network.run(for: .seconds(10)) { false }
        let buffered = serverSide!.readableBytes(streamID: id)
        #expect(buffered > 0)
        #expect(UInt64(buffered) <= window, "server buffered \(buffered) bytes with a \(window)-byte window")
        // The sender is stuck at its send-buffer bound, not growing.
        #expect(client.unacknowledgedBytes(streamID: id) <= client.transport.streamSendBufferLimit)
        #expect(!source.isDone)

        // Once the reader reads, the rest flows and arrives intact.
        reading = true
        sink.drain(serverSide!, stream: id)
        #expect(network.run(for: .seconds(120)) { sink.isFinished(serverSide!, id) })
        #expect(sink.bytes(serverSide!, id) == payload)
    }

    /// A stream is signalled readable once until it is read, and once more when its unread
    /// bytes reach `promptReadThreshold`: an owner that leaves smaller amounts for the end of
    /// its loop pass still hears of a bulk reader's worth as it arrives.
    @Test func readableIsSignalledAgainOnceAPromptReadsWorthIsBuffered() throws {
        // A stream window above the threshold (a listener's starts at 64 KiB).
        let network = SimulatedNetwork(server: try Fixtures.server { $0.transport.initialMaxStreamDataBidirectionalRemote = 1024 * 1024 })
        let source = StreamSource()
        var serverSide: QUICConnection?
        var bufferedAtSignals: [Int] = []
        var reading = false
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server { serverSide = connection }
            if case .streamWritable = event { source.pump() }
            if connection.role == .server, case .streamReadable(let id) = event {
                if reading {
                    sink.drain(connection, stream: id)
                } else {
                    bufferedAtSignals.append(connection.readableBytes(streamID: id))
                }
            }
        }
        network.onStep = { source.pump() }
        let client = try network.connect(Fixtures.client())
        network.run { client.isEstablished }
        let id = try client.openStream(bidirectional: true)
        let payload = pattern(seed: 9, count: 1024 * 1024)
        source.enqueue(client, stream: id, bytes: payload)

        // Nobody reads: the first bytes are signalled, then the threshold, and nothing more.
        network.run(for: .seconds(5)) { false }
        #expect(serverSide!.readableBytes(streamID: id) > 2 * QUICConnection.promptReadThreshold)
        #expect(bufferedAtSignals.count == 2, "signalled with \(bufferedAtSignals) bytes buffered")
        #expect((bufferedAtSignals.last ?? 0) >= QUICConnection.promptReadThreshold)

        // A read re-arms both; the rest arrives intact.
        reading = true
        sink.drain(serverSide!, stream: id)
        #expect(network.run(for: .seconds(60)) { sink.isFinished(serverSide!, id) })
        #expect(sink.bytes(serverSide!, id) == payload)
    }

    @Test func hundredClientsOnOneEndpointAreRoutedCorrectly() throws {
        let run = try EchoRun()
        let context = try Fixtures.client()
        var clients: [(QUICConnection, Int64, [UInt8])] = []
        for index in 0..<100 {
            let client = try run.network.connect(context)
            clients.append((client, 0, pattern(seed: 1000 + UInt64(index), count: 2000 + index)))
        }
        #expect(run.network.run { clients.allSatisfy { $0.0.isEstablished } })
        #expect(run.network.server!.connectionCount == 100)
        for index in clients.indices {
            let (client, _, bytes) = clients[index]
            let id = try client.openStream(bidirectional: true)
            clients[index].1 = id
            run.clientSource.enqueue(client, stream: id, bytes: bytes)
        }
        #expect(run.network.run { clients.allSatisfy { run.clientSink.isFinished($0.0, $0.1) } })
        for (client, id, bytes) in clients {
            #expect(run.clientSink.bytes(client, id) == bytes)
        }
    }

    @Test func unidirectionalStreamsDeliverAndReturnCredit() throws {
        let run = try EchoRun { $0.transport.initialMaxUnidirectionalStreams = 2 }
        let client = try run.connect(Fixtures.client())
        var ids: [Int64] = []
        // Five uni streams through a limit of two: credit must come back as the server reads.
        for index in 0..<5 {
            #expect(run.network.run { client.streamsLeft(bidirectional: false) > 0 })
            let id = try client.openStream(bidirectional: false)
            ids.append(id)
            try client.send(streamID: id, bytes: pattern(seed: UInt64(index), count: 3000), fin: true)
        }
        let server = run.network.serverConnections.first!
        #expect(run.network.run { ids.allSatisfy { run.echo.sink.isFinished(server, $0) } })
        for (index, id) in ids.enumerated() {
            #expect(run.echo.sink.bytes(server, id) == pattern(seed: UInt64(index), count: 3000))
        }
        #expect(throws: QUICError.self) { try server.send(streamID: ids[0], bytes: [1]) }
    }

    @Test func applicationCloseReachesPeerWithCodeAndReason() throws {
        let run = try EchoRun()
        let client = try run.connect(Fixtures.client())
        // Before confirmation a close also travels in Handshake packets, where RFC 9000 §10.2.3
        // replaces the application code with APPLICATION_ERROR; wait for HANDSHAKE_DONE.
        #expect(run.network.run { client.handshakeConfirmed })
        client.close(applicationErrorCode: 99, reason: "bye", now: run.network.now)
        let server = run.network.serverConnections.first!
        #expect(run.network.run { server.isClosed })
        #expect(server.closeReason == .applicationClosed(code: 99, reason: "bye"))
        #expect(client.closeReason == .closedLocally(code: 99, reason: "bye"))
        #expect(throws: QUICError.self) { try client.openStream(bidirectional: true) }
        // Both ends drop their state after the closing/draining period.
        #expect(run.network.run { client.isTerminated && server.isTerminated })
        #expect(run.network.server!.connectionCount == 0)
    }

    @Test func idleTimeoutClosesBothEnds() throws {
        let run = try EchoRun { $0.transport.idleTimeout = .seconds(2) }
        let client = try run.connect(Fixtures.client { $0.transport.idleTimeout = .seconds(2) })
        let server = run.network.serverConnections.first!
        let start = run.network.now
        #expect(run.network.run(for: .seconds(30)) { client.isTerminated && server.isTerminated })
        #expect(client.closeReason == .idleTimeout)
        #expect(server.closeReason == .idleTimeout)
        #expect(run.network.now - start >= .seconds(2))
        #expect(run.network.server!.connectionCount == 0)
    }

    @Test func keepAliveHoldsAnIdleConnectionOpen() throws {
        let run = try EchoRun { $0.transport.idleTimeout = .seconds(2) }
        let client = try run.connect(Fixtures.client {
            $0.transport.idleTimeout = .seconds(2)
            $0.transport.keepAliveInterval = .milliseconds(500)
        })
        run.network.run(for: .seconds(10)) { client.isClosed }
        #expect(client.isEstablished)
    }

    @Test func keyUpdateDuringTransferKeepsDataIntact() throws {
        let run = try EchoRun()
        let client = try run.connect(Fixtures.client())
        let payload = pattern(seed: 21, count: 2 * 1024 * 1024)
        let id = try run.startEcho(client, payload: payload)
        // Wait for handshake confirmation and some data, then rotate keys mid-transfer.
        run.network.run { run.clientSink.bytes(client, id).count > 256 * 1024 }
        // The keys are ngtcp2's: the update needs no TLS session, and both ends freed theirs.
        #expect(client.session == nil && run.network.serverConnections.last?.session == nil)
        try client.initiateKeyUpdate(now: run.network.now)
        #expect(run.network.run(for: .seconds(120)) { run.clientSink.isFinished(client, id) })
        #expect(run.clientSink.bytes(client, id) == payload)
    }
}
