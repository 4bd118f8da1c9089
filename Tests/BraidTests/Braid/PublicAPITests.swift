import Braid
import Foundation
import Synchronization
import Testing

/// The echo application through the public API: streams echoed with end-of-stream mirrored,
/// datagrams echoed.
func echo(_ connection: NetworkConnection<QUIC>) async throws {
    try await withThrowingDiscardingTaskGroup { group in
        group.addTask {
            for await datagram in connection.datagrams { try await connection.datagrams.send(datagram) }
        }
        try await connection.inboundStreams { stream in
            while true {
                let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 65536)
                try await stream.send(content, endOfStream: metadata.isEndOfStream)
                if metadata.isEndOfStream { return }
            }
        }
    }
}

/// A listener on 127.0.0.1 with a system-chosen port, running `handler` in a task.
struct RunningListener {
    let listener: NetworkListener<QUIC>
    let task: Task<Void, any Error>
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: listener.port!) }

    static func start(
        alpn: [String] = ["echo"], configure: (QUIC) -> QUIC = { $0 },
        handler: @escaping @Sendable (NetworkConnection<QUIC>) async throws -> Void = echo
    ) async throws -> RunningListener {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            configure(QUIC(alpn: alpn).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")))
        }
        let task = Task { try await listener.run(handler) }
        for await state in listener.states {
            if state == .ready { break }
            if case .failed(let error) = state { throw error }
        }
        return RunningListener(listener: listener, task: task)
    }
}

/// A server application that accepts streams and never reads them.
@Sendable func readNothing(_ connection: NetworkConnection<QUIC>) async throws {
    try await connection.inboundStreams { _ in try await Task.sleep(for: .seconds(60)) }
}

/// Waits until the connection has sent over 1 MB and its bytes-sent count stops growing (the
/// peer's window is full), checking every 50 ms for up to 5 s; returns that count.
func bytesSentOnceStalled(_ connection: NetworkConnection<QUIC>) async throws -> UInt64 {
    var sent: UInt64 = 0
    for _ in 0..<100 {
        try await Task.sleep(for: .milliseconds(50))
        let now = await connection.statistics?.bytesSent ?? 0
        if now > 1_000_000 && now == sent { break }
        sent = now
    }
    return sent
}

/// A client stack trusting the test CA.
func testClient(alpn: [String] = ["echo"]) -> QUIC {
    QUIC(alpn: alpn).trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost")
}

@Suite(.serialized) struct PublicAPITests {
    @Test func echoOverOneHundredConcurrentStreams() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        let intact = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<100 {
                group.addTask {
                    let payload = Data((0..<(1000 + index * 97)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
                    let stream = try await connection.openStream()
                    try await stream.send(payload, endOfStream: true)
                    var echoed = Data()
                    while true {
                        let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 65536)
                        echoed += content
                        if metadata.isEndOfStream { break }
                    }
                    return echoed == payload
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(intact == 100)
        #expect(connection.negotiatedALPN == "echo")
    }

    @Test func oneThousandDatagramsAreEchoed() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        let sent = Set((0..<1000).map { index in Data((0..<200).map { UInt8(truncatingIfNeeded: $0 ^ index) } + [UInt8(index >> 8), UInt8(index & 0xff)]) })
        let received = Mutex(Set<Data>())
        let collector = Task {
            for await datagram in connection.datagrams where sent.contains(datagram) {
                received.withLock { _ = $0.insert(datagram) }
            }
        }
        defer { collector.cancel() }
        // Datagrams may be lost (a full socket buffer, a lost packet), so send in rounds of
        // 100 and resend what has not come back after a pause, up to 20 rounds.
        for _ in 0..<20 {
            let missing = sent.subtracting(received.withLock { $0 })
            if missing.isEmpty { break }
            for datagram in missing.prefix(100) { try await connection.datagrams.send(datagram) }
            for _ in 0..<50 where !missing.prefix(100).allSatisfy({ datagram in received.withLock { $0.contains(datagram) } }) {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let echoed = received.withLock { $0 }
        #expect(echoed == sent)
        #expect(try #require(connection.usableDatagramFrameSize) >= 1000)
    }

    @Test func listenerServesFiftyClientsAtOnce() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let good = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<50 {
                group.addTask {
                    try await withNetworkConnection(to: server.endpoint) { testClient() } _: { connection in
                        let stream = try await connection.openStream()
                        try await stream.send(UInt32(index))
                        try await stream.send(Data(), endOfStream: true)
                        return try await stream.receive(as: UInt32.self) == UInt32(index)
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(good == 50)
    }

    @Test func statesGoPreparingReadyCancelled() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        #expect(connection.state == .setup)
        let observed = Task {
            var seen: [NetworkConnectionState] = []
            for await state in connection.states { seen.append(state) }
            return seen
        }
        let stream = try await connection.openStream()
        try await stream.send(Data([1]), endOfStream: true)
        _ = try await stream.receive(atLeast: 1, atMost: 1)
        connection.cancel()
        let seen = await observed.value
        #expect(seen.filter { $0 != .setup } == [.preparing, .ready, .cancelled])
    }

    @Test func cancellingMidTransferFailsPendingCallsWithCancelled() async throws {
        // The server reads nothing: the client's large send must block on flow control.
        let server = try await RunningListener.start(handler: readNothing)
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        let stream = try await connection.openStream()
        let sending = Task { try await stream.send(Data(count: 64 * 1024 * 1024), endOfStream: true) }
        let receiving = Task { try await stream.receive(atLeast: 1, atMost: 10) }
        _ = try await bytesSentOnceStalled(connection)
        connection.cancel()
        await #expect(throws: NetworkError.cancelled) { try await sending.value }
        await #expect(throws: NetworkError.cancelled) { try await receiving.value }
        await #expect(throws: NetworkError.cancelled) { try await stream.send(Data([1])) }
        #expect(connection.state == .cancelled)
    }

    @Test func aSlowReaderDoesNotGrowTheSendersMemory() async throws {
        let server = try await RunningListener.start(handler: readNothing)
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
        let sent = try await bytesSentOnceStalled(connection)
        // The peer's stream window (auto-tuned up to 16 MiB) bounds what left; the rest waits
        // in the suspended send, not in a queue.
        #expect(sent > 1_000_000 && sent < 20 * 1024 * 1024, "sent \(sent) bytes to a reader that reads nothing")
        connection.cancel()
        await #expect(throws: NetworkError.cancelled) { try await sending.value }
    }

    @Test func cancellingTheListenerTaskEndsEveryConnectionHandler() async throws {
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
        for _ in 0..<1000 where handlersStarted.value < 5 { try await Task.sleep(for: .milliseconds(5)) }
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

    @Test func wrongALPNFailsWithALPNMismatch() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient(alpn: ["h3"]) }
        await #expect(throws: NetworkError.alpnMismatch(offered: ["h3"])) { _ = try await connection.openStream() }
    }

    @Test func untrustedCertificateFailsWithTheReason() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        // The system store does not know the test CA.
        let connection = NetworkConnection(to: server.endpoint) { QUIC(alpn: ["echo"]).serverName("localhost") }
        await #expect(throws: NetworkError.certificateRejected(.untrusted)) { _ = try await connection.openStream() }
    }

    @Test func aPortWithNoServerFailsWithNoResponse() async throws {
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: 9)
        let connection = NetworkConnection(to: endpoint) { testClient().handshakeTimeout(.seconds(1)) }
        await #expect(throws: NetworkError.noResponse(endpoint: endpoint.description, timeout: .seconds(1))) {
            _ = try await connection.openStream()
        }
    }

    @Test func resumptionDeliversEarlyData() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let cache = QUIC.SessionCache()
        try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(cache) } _: { connection in
            let stream = try await connection.openStream()
            try await stream.send(Data([1]), endOfStream: true)
            _ = try await stream.receive(atLeast: 1, atMost: 1)
            // The ticket arrives just after the handshake; wait for it.
            while cache.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
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

@Suite struct ConnectionDetailsTests {
    @Test func statisticsAndStateCallbackReportTheConnection() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        let seen = Mutex<[NetworkConnectionState]>([])
        connection.onStateUpdate { _, state in seen.withLock { $0.append(state) } }
        let stream = try await connection.openStream()
        let payload = Data(count: 200_000)
        try await stream.send(payload, endOfStream: true)
        _ = try await stream.receive(exactly: payload.count)
        let statistics = try #require(await connection.statistics)
        #expect(statistics.bytesSent > UInt64(payload.count) && statistics.bytesReceived > UInt64(payload.count))
        #expect(statistics.smoothedRTT > .zero && statistics.congestionWindow > 0)
        // A client connection owns its socket: its system calls are its own.
        #expect(statistics.sendmsgCalls + statistics.sendmmsgCalls > 0 && statistics.recvmmsgCalls > 0)
        #expect(connection.remoteEndpoint == server.endpoint)
        connection.cancel()
        #expect(seen.withLock { $0 } == [.preparing, .ready, .cancelled])
    }

    @Test func fileSessionCacheResumesAcrossCacheInstances() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("braid-tickets-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let first = try QUIC.SessionCache(file: file)
        try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(first) } _: { connection in
            let stream = try await connection.openStream()
            try await stream.send(Data([1]), endOfStream: true)
            _ = try await stream.receive(exactly: 1)
            while first.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        // A new cache reading the same file, as after a restart of the client.
        let reloaded = try QUIC.SessionCache(file: file)
        #expect(reloaded.count == 1)
        let resumed = NetworkConnection(to: server.endpoint) { testClient().sessionCache(reloaded) }
        defer { resumed.cancel() }
        let stream = try await resumed.openStream()
        try await stream.sendIdempotent(Data([2]), endOfStream: true)
        #expect(try await stream.receive(exactly: 1).content == Data([2]))
        #expect(resumed.earlyDataAccepted)
        // A corrupt file is ignored, not trusted. (Its own file: the resumed connection may
        // still be storing the ticket it was just sent into `file`.)
        let corrupt = file + ".corrupt"
        defer { try? FileManager.default.removeItem(atPath: corrupt) }
        try Data([0, 0, 0, 9, 1, 2]).write(to: URL(fileURLWithPath: corrupt))
        #expect(try QUIC.SessionCache(file: corrupt).count == 0)
    }
}

final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
