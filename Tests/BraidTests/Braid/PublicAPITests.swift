import Braid
import BraidCore
import BraidTLS
import Foundation
import Testing

/// Waits until the connection has sent over 1 MB and its bytes-sent count has not grown for
/// ten checks 50 ms of virtual time apart (the peer's window is full), for up to 30 s of
/// virtual time; returns that count.
private func bytesSentOnceStalled(_ connection: NetworkConnection<QUIC>, in world: MemoryWorld) async throws -> UInt64 {
    var sent: UInt64 = 0
    var unchanged = 0
    for _ in 0..<600 where unchanged < 10 {
        try await world.sleep(for: .milliseconds(50))
        let now = await connection.statistics?.bytesSent ?? 0
        unchanged = now > 1_000_000 && now == sent ? unchanged + 1 : 0
        sent = now
    }
    return sent
}

/// QUIC connections and listeners through the public API (streams, datagrams, states,
/// cancellation, backpressure, the handshake's failures, resumption, the listener's limits) on
/// a virtual loop over an in-memory network (`MemoryWorld`): the same code as over loopback,
/// less the kernel, with the test moving time.
@Suite struct PublicAPITests {
    @Test(.timeLimit(.minutes(10))) func echoOverOneHundredConcurrentStreams() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            defer { connection.cancel() }
            let intact = try await echoOnConcurrentStreams(connection, count: 100)
            #expect(intact == 100)
            #expect(connection.negotiatedALPN == "echo")
        }
    }

    @Test(.timeLimit(.minutes(10))) func oneThousandDatagramsAreEchoed() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            defer { connection.cancel() }
            let sent = Set((0..<1000).map { (index: Int) -> Data in
                let body: [UInt8] = (0..<200).map { (byte: Int) -> UInt8 in UInt8(truncatingIfNeeded: byte ^ index) }
                let tail: [UInt8] = [UInt8(index >> 8), UInt8(index & 0xff)]
                return Data(body + tail)
            })
            let received = Locked(Set<Data>())
            let collector = Task {
                for await datagram in connection.datagrams where sent.contains(datagram) {
                    received.withLock { _ = $0.insert(datagram) }
                }
            }
            defer { collector.cancel() }
            // Datagrams may be dropped (the engine's queue or an inbox full), so send in
            // rounds of 100 and resend what has not come back after a pause, until a generous
            // deadline (virtual time runs on while the collector waits for a thread, so a
            // round's pause can end before its echoes are read on a loaded machine).
            let deadline = ContinuousClock.now + .seconds(300)
            while ContinuousClock.now < deadline {
                let missing = sent.subtracting(received.withLock { $0 })
                if missing.isEmpty { break }
                let round = Array(missing.prefix(100))
                for datagram in round { try await connection.datagrams.send(datagram) }
                _ = try await world.eventually(within: .seconds(5)) {
                    round.allSatisfy { datagram in received.withLock { $0.contains(datagram) } }
                }
            }
            let echoed = received.withLock { $0 }
            #expect(echoed == sent)
            #expect(try #require(connection.usableDatagramFrameSize) >= 1000)
        }
    }

    @Test(.timeLimit(.minutes(10))) func listenerServesFiftyClientsAtOnce() async throws {
        let good = try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            return try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<50 {
                    group.addTask {
                        try await withNetworkConnection(to: server.endpoint) { testClient() } _: { connection in
                            let stream = try await connection.openStream()
                            try await stream.send(UInt32(index))
                            try await stream.send(Data(), endOfStream: true)
                            return try await stream.receive(as: UInt32.self).content == UInt32(index)
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        #expect(good == 50)
    }

    @Test(.timeLimit(.minutes(10))) func statesGoPreparingReadyCancelled() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            #expect(connection.state == .setup)
            let states = connection.states  // subscribed now, before anything can change
            let observed = Task {
                var seen: [NetworkConnectionState] = []
                for await state in states { seen.append(state) }
                return seen
            }
            let stream = try await connection.openStream()
            try await stream.send(Data([1]), endOfStream: true)
            _ = try await stream.receive(atLeast: 1, atMost: 1)
            connection.cancel()
            let seen = await observed.value
            #expect(seen.filter { $0 != .setup } == [.preparing, .ready, .cancelled])
        }
    }

    @Test(.timeLimit(.minutes(10))) func cancellingMidTransferFailsPendingCallsWithCancelled() async throws {
        try await MemoryWorld.run { world in
            // The server reads nothing: the client's large send must block on flow control
            // (windows as large as a client's, so a good part of the send leaves first).
            let server = try await RunningListener.start(configure: Self.clientSizedWindows, handler: readNothing)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            let stream = try await connection.openStream()
            let sending = Task { try await stream.send(Data(count: 64 * 1024 * 1024), endOfStream: true) }
            let receiving = Task { try await stream.receive(atLeast: 1, atMost: 10) }
            _ = try await bytesSentOnceStalled(connection, in: world)
            connection.cancel()
            await #expect(throws: NetworkError.cancelled) { try await sending.value }
            await #expect(throws: NetworkError.cancelled) { try await receiving.value }
            await #expect(throws: NetworkError.cancelled) { try await stream.send(Data([1])) }
            #expect(connection.state == .cancelled)
        }
    }

    /// A listener's windows as large as a client's (a listener's own start at 64 KiB per stream).
    @Sendable static func clientSizedWindows(_ quic: QUIC) -> QUIC {
        quic.initialMaxData(4 << 20).initialMaxStreamDataBidirectionalRemote(1 << 20)
    }

    @Test(.timeLimit(.minutes(10))) func aSlowReaderDoesNotGrowTheSendersMemory() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start(configure: Self.clientSizedWindows, handler: readNothing)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient().streamSendBufferLimit(1024 * 1024) }
            defer { connection.cancel() }
            let stream = try await connection.openStream()
            // 256 MB offered in 1 MB sends: without backpressure they would all be queued at once.
            let sending = Task {
                var sends = 0
                for _ in 0..<256 {
                    try await stream.send(Data(count: 1024 * 1024))
                    sends += 1
                }
                return sends
            }
            let sent = try await bytesSentOnceStalled(connection, in: world)
            // The peer's stream window (auto-tuned up to 16 MiB) bounds what left; the rest
            // waits in the suspended send, not in a queue.
            #expect(sent > 1_000_000 && sent < 20 * 1024 * 1024, "sent \(sent) bytes to a reader that reads nothing")
            connection.cancel()
            await #expect(throws: NetworkError.cancelled) { try await sending.value }
        }
    }

    @Test(.timeLimit(.minutes(10))) func cancellingTheListenerTaskEndsEveryConnectionHandler() async throws {
        try await MemoryWorld.run { world in
            let handlersStarted = Counter(), handlersEnded = Counter()
            let server = try await RunningListener.start(handler: { connection in
                handlersStarted.increment()
                defer { handlersEnded.increment() }
                try await connection.inboundStreams { _ in }
            })
            var connections: [NetworkConnection<QUIC>] = []
            for _ in 0..<5 {
                let connection = NetworkConnection(to: server.endpoint) { testClient() }
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: true)
                connections.append(connection)
            }
            _ = try await world.eventually { handlersStarted.value == 5 }
            #expect(handlersStarted.value == 5)
            server.task.cancel()
            _ = try? await server.task.value
            #expect(handlersEnded.value == 5)
            #expect(server.listener.state == .cancelled)
            // The clients learn that their server went away.
            for connection in connections {
                for await state in connection.states where state.isFinal { break }
                #expect(connection.state == .failed(.peerClosed(code: 0, reason: "")))
            }
        }
    }

    @Test(.timeLimit(.minutes(10))) func wrongALPNFailsWithALPNMismatch() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient(alpn: ["h3"]) }
            await #expect(throws: NetworkError.alpnMismatch(offered: ["h3"])) { _ = try await connection.openStream() }
        }
    }

    @Test(.timeLimit(.minutes(10))) func untrustedCertificateFailsWithTheReason() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            // The system store does not know the test CA.
            let connection = NetworkConnection(to: server.endpoint) { QUIC(alpn: ["echo"]).testTimeouts().serverName("localhost") }
            await #expect(throws: NetworkError.certificateRejected(.untrusted)) { _ = try await connection.openStream() }
        }
    }

    /// Nobody answers: the handshake times out after exactly its timeout of virtual time.
    @Test(.timeLimit(.minutes(10))) func aPortWithNoServerFailsWithNoResponse() async throws {
        try await MemoryWorld.run { world in
            let endpoint = world.nobody()
            let connection = NetworkConnection(to: endpoint) { testClient().handshakeTimeout(.seconds(1)) }
            await #expect(throws: NetworkError.noResponse(endpoint: endpoint.description, timeout: .seconds(1))) {
                _ = try await connection.openStream()
            }
        }
    }

    @Test(.timeLimit(.minutes(10))) func resumptionDeliversEarlyData() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let cache = QUIC.SessionCache()
            try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(cache) } _: { connection in
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: true)
                _ = try await stream.receive(atLeast: 1, atMost: 1)
                // The ticket arrives just after the handshake; wait for it.
                #expect(try await world.eventually { cache.count > 0 }, "no session ticket arrived")
            }
            let resumed = NetworkConnection(to: server.endpoint) { testClient().sessionCache(cache) }
            defer { resumed.cancel() }
            let stream = try await resumed.openStream()
            try await stream.sendIdempotent(Data("early".utf8), endOfStream: true)
            let (reply, _) = try await stream.receive(exactly: 5)
            #expect(reply == Data("early".utf8))
            #expect(resumed.earlyDataAccepted)
        }
    }

    /// A listener's live counts follow its connections, and a client over its address's limit
    /// is refused with an error that says the server is busy.
    @Test(.timeLimit(.minutes(10))) func aBusyListenerSaysSo() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start(configure: { $0.newConnectionLimitPerAddress(2) })
            defer { server.task.cancel() }
            let endpoint = server.endpoint, listener = server.listener
            let held = [NetworkConnection(to: endpoint) { testClient() }, NetworkConnection(to: endpoint) { testClient() }]
            defer { for connection in held { connection.cancel() } }
            for connection in held {
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: false)
                _ = try await stream.receive(atLeast: 1, atMost: 1)
            }
            let statistics = try #require(await listener.statistics)
            #expect(statistics.connections == 2)
            #expect(statistics.halfOpenHandshakes == 0)
            #expect(statistics.streams == 2)
            let refused = NetworkConnection(to: endpoint) { testClient() }
            do {
                _ = try await refused.openStream()
                Issue.record("a third connection from the same address was served")
            } catch let error as NetworkError {
                guard case .serverBusy(_, let reason) = error else {
                    Issue.record("expected serverBusy, got \(error)")
                    return
                }
                #expect(reason == "server busy: too many connections from this address")
                #expect(error.description.contains("is busy and refused the connection"))
            }
            #expect(await listener.statistics?.refusedConnections == 1)
        }
    }

    /// At `newConnectionLimit` a new client takes the place of the connection idle longest,
    /// whose client learns that the server was busy; a client arriving while the only
    /// connection has a stream open is refused as busy.
    @Test(.timeLimit(.minutes(10))) func aFullListenerEvictsTheIdleConnection() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start(connectionLimit: 1)
            defer { server.task.cancel() }
            let endpoint = server.endpoint, listener = server.listener
            let idle = NetworkConnection(to: endpoint) { testClient() }
            defer { idle.cancel() }
            #expect(try await echoOnConcurrentStreams(idle, count: 1) == 1)
            // Every stream finished: the connection is idle.
            try await world.sleep(for: .milliseconds(50))
            let newcomer = NetworkConnection(to: endpoint) { testClient() }
            defer { newcomer.cancel() }
            let held = try await newcomer.openStream()
            try await held.send(Data([7]), endOfStream: false)
            _ = try await held.receive(atLeast: 1, atMost: 1)
            for await state in idle.states {
                guard case .failed(let error) = state else { continue }
                guard case .serverBusy(_, let reason) = error else {
                    Issue.record("the evicted connection failed with \(error), not serverBusy")
                    break
                }
                #expect(reason == "server busy: idle connection closed to make room")
                #expect(error.description.contains("closed this idle connection"), "\(error)")
                break
            }
            #expect(await listener.statistics?.evictedConnections == 1)

            // The newcomer's stream is open: nothing is idle, so the next client is refused.
            let refused = NetworkConnection(to: endpoint) { testClient() }
            await #expect(throws: NetworkError.serverBusy(endpoint: endpoint.description, reason: "server busy: connection limit reached")) {
                _ = try await refused.openStream()
            }
        }
    }
}

private final class Counter: Sendable {
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
