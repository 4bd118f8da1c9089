import Braid
import BraidCore
import BraidTLS
import Foundation
import Testing

/// Waits until the connection has sent over 1 MB and its bytes-sent count stops growing (the
/// peer's window is full), checking every 50 ms for up to 5 s; returns that count.
private func bytesSentOnceStalled(_ connection: NetworkConnection<QUIC>) async throws -> UInt64 {
    var sent: UInt64 = 0
    for _ in 0..<100 {
        try await Task.sleep(for: .milliseconds(50))
        let now = await connection.statistics?.bytesSent ?? 0
        if now > 1_000_000 && now == sent { break }
        sent = now
    }
    return sent
}

@Suite(.serialized) struct PublicAPITests {
    @Test func echoOverOneHundredConcurrentStreams() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        let intact = try await echoOnConcurrentStreams(connection, count: 100)
        #expect(intact == 100)
        #expect(connection.negotiatedALPN == "echo")
    }

    @Test func oneThousandDatagramsAreEchoed() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        let sent = Set((0..<1000).map { index in Data((0..<200).map { UInt8(truncatingIfNeeded: $0 ^ index) } + [UInt8(index >> 8), UInt8(index & 0xff)]) })
        let received = Locked(Set<Data>())
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
                        return try await stream.receive(as: UInt32.self).content == UInt32(index)
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

private final class Counter: Sendable {
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
