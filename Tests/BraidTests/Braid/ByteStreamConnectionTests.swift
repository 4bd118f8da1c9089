import BraidIO
import BraidTLS
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Braid
import BraidCore

/// TLS-over-TCP and TCP connections and listeners through the public API, over loopback:
/// send and receive on the connection itself, byte-checked transfers, bounded memory under a
/// slow reader, the typed errors, establishment, and a listener with many clients.
@Suite struct ByteStreamConnectionTests {
    @Test func tlsEchoesWithTheAgreedALPN() async throws {
        let server = try await RunningStreamListener.start(testTLSServer())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        defer { connection.cancel() }
        try await connection.send(Data("Hello, world!".utf8))
        try await connection.send(UInt32(0xDEAD_BEEF))
        #expect(try await connection.receive(exactly: 13).content == Data("Hello, world!".utf8))
        #expect(try await connection.receive(as: UInt32.self).content == 0xDEAD_BEEF)
        #expect(connection.state == .ready)
        #expect(connection.negotiatedALPN == "echo")
        #expect(connection.remoteEndpoint == server.endpoint)
        #expect(connection.localEndpoint != nil)
    }

    @Test func tcpEchoesAndMirrorsTheEndOfStream() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { TCP { IP().version(.v4) }.noDelay(true) }
        defer { connection.cancel() }
        try await connection.send(Data("ping".utf8), endOfStream: true)
        let reply = try await receiveAll(connection)
        #expect(reply == Array("ping".utf8))
    }

    /// 100 MB each way through TLS, byte for byte.
    @Test(.timeLimit(.minutes(10))) func tlsMovesOneHundredMegabytesIntact() async throws {
        let server = try await RunningStreamListener.start(testTLSServer())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        defer { connection.cancel() }
        let payload = pattern(seed: 14, count: 100_000_000)
        async let sent: Void = sendAll(payload, on: connection)
        let echoed = try await receiveAll(connection)
        try await sent
        #expect(echoed.count == payload.count)
        #expect(echoed == payload)
    }

    /// A server that does not read: the client's sends stop returning once TCP's window, the
    /// kernel's buffers and both connections' bounds are full, and neither side holds more
    /// than its bounds.
    @Test(.timeLimit(.minutes(10))) func aReaderThatStopsStopsTheSenderWithBoundedMemory() async throws {
        let serverConnection = TestSignal<NetworkConnection<TLS>>()
        let server = try await RunningStreamListener.start(testTLSServer(), handler: { connection in
            serverConnection.fulfill(connection)
            try await Task.sleep(for: .seconds(3600))
        })
        defer { server.task.cancel() }
        let limit = 256 * 1024
        let connection = NetworkConnection(to: server.endpoint) {
            TLS { TCP().receiveBufferLimit(limit).sendBufferLimit(limit) }.alpn(["echo"])
                .trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost")
        }
        defer { connection.cancel() }
        // Connected first, so the time the sender takes to get stuck is not the handshake's.
        try await connection.send(Data("first".utf8))
        let reader = try #require(await serverConnection.wait(), "the server's handler never got the connection")
        let sentBytes = Atomic(0)
        let sender = Task {
            let chunk = Data(repeating: 7, count: 64 * 1024)
            while true {
                try await connection.send(chunk)
                sentBytes.add(chunk.count, ordering: .relaxed)
            }
        }
        defer { sender.cancel() }
        // Let the sender run until it is stuck.
        var last = -1
        while sentBytes.load(ordering: .relaxed) != last {
            last = sentBytes.load(ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(500))
        }
        let stuckAt = sentBytes.load(ordering: .relaxed)
        // Kernel buffers on loopback hold a few MB at most; without backpressure the sender
        // would have gone on forever.
        #expect(stuckAt < 64 << 20)
        let unread = try #require(reader.shared.byteStream).end.inbox.available
        #expect(unread <= TCP().receiveBufferLimit + 64 * 1024)
        let queued = try #require(connection.shared.byteStream).end.outbox.waitingSenders
        #expect(queued <= 1)
        // Reading resumes the flow: the server takes 4 MB and the sender moves on.
        var taken = 0
        while taken < 4 << 20 { taken += try await reader.receive(atLeast: 1, atMost: 1 << 20).content.count }
        // Until the sender moves on, within a generous deadline; no timing asserted.
        #expect(try await waitUntil { sentBytes.load(ordering: .relaxed) > stuckAt }, "the sender stayed stuck")
    }

    /// A receive larger than the connection's receive bound still completes: the bound holds
    /// back reading only while nobody waits for more.
    @Test func aReceiveLargerThanTheReceiveBoundCompletes() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { TCP().receiveBufferLimit(64 * 1024) }
        defer { connection.cancel() }
        let payload = pattern(seed: 3, count: 3 << 20)
        async let sent: Void = sendAll(payload, on: connection)
        let echoed = try await connection.receive(exactly: payload.count).content
        try await sent
        #expect(Array(echoed) == payload)
    }

    @Test func aClosedPortIsRefused() async throws {
        // Bind and close a listener to find a port nobody listens on.
        let probe = try await RunningStreamListener.start(TCP())
        let port = probe.port
        probe.task.cancel()
        _ = try? await probe.task.value
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { TCP() }
        await #expect(throws: NetworkError.connectionRefused(endpoint: "127.0.0.1:\(port)")) {
            try await connection.send(Data("x".utf8))
        }
        #expect(connection.state == .failed(.connectionRefused(endpoint: "127.0.0.1:\(port)")))
    }

    @Test(arguments: ["untrusted", "wrong-name"])
    func aServerCertificateThatFailsVerificationIsRejected(certificate: String) async throws {
        let server = try await RunningStreamListener.start(
            TLS().alpn(["echo"]).identity(
                certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem")))
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        defer { connection.cancel() }
        do {
            try await connection.send(Data("x".utf8))
            _ = try await connection.receive(exactly: 1)
            Issue.record("the handshake succeeded with the \(certificate) certificate")
        } catch NetworkError.certificateRejected(let problem) {
            #expect(problem == (certificate == "untrusted" ? .untrusted : .nameMismatch(expected: "localhost")))
        }
    }

    @Test func anALPNMismatchIsNamed() async throws {
        let server = try await RunningStreamListener.start(testTLSServer(alpn: ["other"]))
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        defer { connection.cancel() }
        await #expect(throws: NetworkError.self) { try await connection.send(Data("x".utf8)) }
        guard case .failed(let error) = connection.state else {
            Issue.record("not failed: \(connection.state)")
            return
        }
        switch error {
        case .alpnMismatch, .handshakeRejectedByPeer(alert: 120): break
        default: Issue.record("unexpected error \(error)")
        }
    }

    /// No route for two rounds: the connection waits, retries by itself and becomes ready,
    /// through the same establishment QUIC uses.
    @Test func noRouteWaitsThenConnects() async throws {
        let server = try await RunningStreamListener.start(testTLSServer())
        defer { server.task.cancel() }
        let port = server.port.rawValue
        ClientEstablishment.routeFailuresForTesting.withLock { $0[port] = (ENETUNREACH, 2) }
        defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port) } }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        let states = connection.states
        let observed = Task {
            var seen: [NetworkConnectionState] = []
            for await state in states { seen.append(state) }
            return seen
        }
        try await connection.send(Data("hi".utf8))
        #expect(try await connection.receive(exactly: 2).content == Data("hi".utf8))
        connection.cancel()
        let unreachable = NetworkConnectionState.waiting(.system(call: "connect(\(server.endpoint))", errno: ENETUNREACH))
        #expect(await observed.value == [.setup, .preparing, unreachable, .preparing, unreachable, .preparing, .ready, .cancelled])
    }

    /// A name whose first address has nothing listening: the race moves to the next address.
    /// The closed address's port is held by a socket that never listens: left free, another
    /// test's listener could take it, and the client would reach that one instead.
    @Test(arguments: [("::1", "127.0.0.1"), ("127.0.0.1", "::1")])
    func happyEyeballsReachesTheServerOnEitherFamily(serverHost: String, closedHost: String) async throws {
        var attempt: (server: RunningStreamListener<TCP>, closed: ClosedTCPPort)?
        for _ in 0..<20 where attempt == nil {
            let server = try await RunningStreamListener.start(host: NWEndpoint.Host(serverHost), TCP())
            if let closed = ClosedTCPPort(SocketAddress(ip: closedHost, port: server.port.rawValue)!) {
                attempt = (server, closed)
            } else {
                server.task.cancel()
            }
        }
        let (server, closed) = try #require(attempt, "no port free on both \(serverHost) and \(closedHost)")
        defer { server.task.cancel(); withExtendedLifetime(closed) {} }
        let port = server.port.rawValue
        let name = "tcp-dual-\(port).test"
        Resolver.namesForTesting.withLock {
            $0[name] = [SocketAddress(ip: closedHost, port: port)!, SocketAddress(ip: serverHost, port: port)!]
        }
        defer { _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: name) } }
        let connection = NetworkConnection(to: .hostPort(host: .name(name), port: server.port)) { TCP() }
        defer { connection.cancel() }
        try await connection.send(Data("ok".utf8))
        #expect(try await connection.receive(exactly: 2).content == Data("ok".utf8))
        #expect(connection.remoteEndpoint == .hostPort(host: NWEndpoint.Host(serverHost), port: server.port))
    }

    /// Cancelling mid-transfer ends the pending calls on both ends, with no hang: the client's
    /// sends fail with `cancelled`, and the server's receive ends cleanly (close_notify got
    /// out) or with the error a lost close_notify gives.
    @Test(.timeLimit(.minutes(10))) func cancellingMidTransferEndsBothSides() async throws {
        let serverEnd = Locked<Result<Int, NetworkError>?>(nil)
        let receivedSoFar = Locked(0)
        let server = try await RunningStreamListener.start(testTLSServer(), handler: { connection in
            var received = 0
            do {
                while true {
                    let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 1 << 20)
                    received += content.count
                    receivedSoFar.withLock { $0 = received }
                    if metadata.isEndOfStream { break }
                }
                serverEnd.withLock { $0 = .success(received) }
            } catch let error as NetworkError {
                serverEnd.withLock { $0 = .failure(error) }
                throw error
            }
        })
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        let sender = Task {
            let chunk = Data(repeating: 1, count: 1 << 20)
            while true { try await connection.send(chunk) }
        }
        // Mid-transfer: once the server has received some of the bytes.
        let transferring = ContinuousClock.now + .seconds(60)
        while receivedSoFar.withLock({ $0 }) == 0 && ContinuousClock.now < transferring {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(receivedSoFar.withLock { $0 } > 0, "the transfer never started")
        connection.cancel()
        await #expect(throws: NetworkError.cancelled) { try await sender.value }
        #expect(connection.state == .cancelled)
        let ended = ContinuousClock.now + .seconds(60)
        while serverEnd.withLock({ $0 }) == nil && ContinuousClock.now < ended {
            try await Task.sleep(for: .milliseconds(50))
        }
        switch try #require(serverEnd.withLock { $0 }) {
        case .success(let received): #expect(received > 0)
        case .failure(let error): #expect([NetworkError.connectionReset, .truncated].contains(error))
        }
    }

    /// Bytes whose sends returned are delivered even when the sender closes right after:
    /// `close()` is graceful (the data, then close_notify and FIN), not a reset.
    @Test(.timeLimit(.minutes(10)), arguments: [true, false])
    func closingRightAfterSendingLosesNothing(tls: Bool) async throws {
        let received = TestSignal<[UInt8]>()
        let payload = pattern(seed: 21, count: 8_000_000)
        if tls {
            let server = try await RunningStreamListener.start(testTLSServer(), handler: { connection in
                let bytes = try await receiveAll(connection)
                received.fulfill(bytes)
            })
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
            try await sendAll(payload, on: connection)
            await connection.close()
            // Before the listener goes: until the server has read everything.
            _ = await received.wait()
        } else {
            let server = try await RunningStreamListener.start(TCP(), handler: { connection in
                let bytes = try await receiveAll(connection)
                received.fulfill(bytes)
            })
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { TCP() }
            try await sendAll(payload, on: connection)
            await connection.close()
            // Before the listener goes: until the server has read everything.
            _ = await received.wait()
        }
        #expect(received.value == payload, "the server never read to the end, or read other bytes")
    }

    /// 200 clients at once, each echoed its own bytes.
    @Test(.timeLimit(.minutes(10))) func aListenerServesTwoHundredClients() async throws {
        let server = try await RunningStreamListener.start(testTLSServer())
        defer { server.task.cancel() }
        let intact = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
                    defer { connection.cancel() }
                    let payload = pattern(seed: UInt64(index), count: 1000 + index)
                    try await connection.send(payload, endOfStream: true)
                    return try await receiveAll(connection) == payload
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(intact == 200)
    }

    /// Over the limit, a client is reset at once instead of waiting.
    @Test func newConnectionLimitRefusesTheNextClient() async throws {
        let entered = TestSignal<Void>()
        let server = try await RunningStreamListener.start(TCP(), configure: { $0.newConnectionLimit = 1 }, handler: { connection in
            entered.fulfill(())
            try await Task.sleep(for: .seconds(3600))
            _ = connection
        })
        defer { server.task.cancel() }
        let first = NetworkConnection(to: server.endpoint) { TCP() }
        defer { first.cancel() }
        try await first.send(Data("1".utf8))
        // The listener holds the first connection before the second arrives.
        try #require(await entered.wait() != nil, "the first connection never reached its handler")
        let second = NetworkConnection(to: server.endpoint) { TCP() }
        defer { second.cancel() }
        // The kernel completes the handshake before the listener refuses, so the reset may
        // meet the send or the receive after it.
        await #expect(throws: NetworkError.connectionReset) {
            try await second.send(Data("2".utf8))
            _ = try await second.receive(exactly: 1)
        }
    }

    /// Once `run` is cancelled, the listening socket closes at once, though `run` keeps
    /// running for a handler that has not returned: new clients are refused (a client already
    /// in the backlog when it closed is reset), never accepted without a handler, and the held
    /// connection is still served.
    @Test(.timeLimit(.minutes(10))) func aCancelledListenerRefusesNewClients() async throws {
        let entered = TestSignal<Void>(), open = TestSignal<Void>()
        let server = try await RunningStreamListener.start(TCP(), handler: { connection in
            let request = try await connection.receive(exactly: 1).content
            entered.fulfill(())
            // Not cancelled with the handler: `run` cannot return before the test lets it.
            await Task { _ = await open.wait(within: .seconds(600)) }.value
            try await connection.send(request)
        })
        defer {
            open.fulfill(())
            server.task.cancel()
        }
        let held = NetworkConnection(to: server.endpoint) { TCP() }
        defer { held.cancel() }
        try await held.send(Data("1".utf8))
        try #require(await entered.wait() != nil, "the first connection never reached its handler")
        server.task.cancel()
        var refused = false
        // Clients until one is refused (those taken from the backlog first are reset), within
        // a generous deadline.
        let deadline = ContinuousClock.now + .seconds(60)
        while !refused && ContinuousClock.now < deadline {
            let late = NetworkConnection(to: server.endpoint) { TCP() }
            defer { late.cancel() }
            do {
                try await late.send(Data("2".utf8))
                let reply = try await late.receive(exactly: 1).content
                Issue.record("a client connecting after cancellation was served: \(Array(reply))")
                break
            } catch NetworkError.connectionRefused {
                refused = true
            } catch NetworkError.connectionReset {
                // Taken from the backlog before the listening socket closed.
            } catch {
                Issue.record("a client connecting after cancellation failed with \(error)")
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(refused, "the cancelled listener still accepts connections")
        open.fulfill(())
        #expect(try await held.receive(exactly: 1).content == Data("1".utf8))
        try await server.task.value
    }

    @Test func aListenerWithoutAnIdentityFailsClearly() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TLS() }
        await #expect(throws: NetworkError.invalidConfiguration(
            "a TLS listener needs a certificate: add .identity(certificateChainFile:privateKeyFile:) (classic API: sec_protocol_options_set_local_identity)")) {
            try await listener.run { _ in }
        }
    }
}
