import BraidIO
import Foundation
import Glibc
import Testing

@testable import Braid
import BraidCore

/// The TLS and TCP options that change who may connect and how: mutual TLS, Multipath TCP,
/// listeners on several loops, fast open, service classes; checked through the public API.
@Suite struct ByteStreamOptionsTests {
    private func mutualTLSServer() async throws -> RunningStreamListener<TLS> {
        try await RunningStreamListener.start(
            testTLSServer().peerAuthentication(.required).trust(.certificateAuthorities(file: Fixtures.caFile)))
    }

    @Test func mutualTLSAcceptsAClientWithACertificateFromTheTrustedCA() async throws {
        let server = try await mutualTLSServer()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            testTLSClient().identity(certificateChainFile: Fixtures.path("client.pem"), privateKeyFile: Fixtures.path("client-key.pem"))
        }
        defer { connection.cancel() }
        try await connection.send(Data("mtls".utf8))
        #expect(try await connection.receive(exactly: 4).content == Data("mtls".utf8))
    }

    @Test func mutualTLSRefusesAClientWithoutACertificate() async throws {
        let server = try await mutualTLSServer()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
        defer { connection.cancel() }
        await #expect(throws: NetworkError.handshakeRejectedByPeer(alert: 116)) {
            try await connection.send(Data("x".utf8))
            _ = try await connection.receive(exactly: 1)
        }
    }

    @Test func mutualTLSRefusesACertificateFromAnotherCA() async throws {
        let server = try await mutualTLSServer()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            testTLSClient().identity(
                certificateChainFile: Fixtures.path("untrusted-client.pem"), privateKeyFile: Fixtures.path("untrusted-client-key.pem"))
        }
        defer { connection.cancel() }
        do {
            try await connection.send(Data("x".utf8))
            _ = try await connection.receive(exactly: 1)
            Issue.record("an untrusted client certificate was accepted")
        } catch NetworkError.handshakeRejectedByPeer(let alert) {
            #expect([42, 48].contains(alert))  // bad_certificate or unknown_ca
        }
    }

    @Test func aListenerThatAsksForClientCertificatesMustNameTheirAuthorities() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { testTLSServer().peerAuthentication(.optional) }
        await #expect(throws: NetworkError.self) { try await listener.run { _ in } }
        guard case .failed(.invalidConfiguration(let message)) = listener.state else {
            Issue.record("state \(listener.state)")
            return
        }
        #expect(message.contains("trust(.certificateAuthorities(file:))"))
    }

    /// An MPTCP client to an MPTCP listener runs MPTCP; to a plain listener it falls back to
    /// TCP and says so. (This kernel has net.mptcp.enabled=1.)
    @Test func multipathRunsMPTCPOrReportsTheFallback() async throws {
        let enabled = try String(contentsOfFile: "/proc/sys/net/mptcp/enabled", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(enabled == "1", "MPTCP is off on this kernel (sysctl net.mptcp.enabled=1 turns it on)")
        let parameters = NetworkParameters(stack: TCP()).multipathServiceType(.handover)
        let multipathListener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any), using: parameters)
        let running = Task { try await multipathListener.run(echoBytes) }
        defer { running.cancel() }
        for await state in multipathListener.states where state == .ready { break }
        let plain = try await RunningStreamListener.start(TCP())
        defer { plain.task.cancel() }

        for (port, expected) in [(multipathListener.port!, true), (plain.port, false)] {
            let connection = NetworkConnection(
                to: .hostPort(host: "127.0.0.1", port: port), using: .parameters { TCP() }.multipathServiceType(.interactive))
            defer { connection.cancel() }
            try await connection.send(Data("mp".utf8))
            #expect(try await connection.receive(exactly: 2).content == Data("mp".utf8))
            #expect(connection.isMultipath == expected)
        }
    }

    /// A listener on two loops: connections are spread over both, each served where accepted.
    @Test func aListenerOnTwoLoopsServesConnectionsOnBoth() async throws {
        let loopsSeen = Locked<Set<String>>([])
        let server = try await RunningStreamListener.start(TCP().serverLoops(2), handler: { connection in
            loopsSeen.withLock { _ = $0.insert(connection.loop.name) }
            try await echoBytes(connection)
        })
        defer { server.task.cancel() }
        for index in 0..<40 {
            let connection = NetworkConnection(to: server.endpoint) { TCP() }
            defer { connection.cancel() }
            try await connection.send(Data([UInt8(index)]), endOfStream: true)
            let echoed = try await receiveAll(connection)
            #expect(echoed == [UInt8(index)], "connection \(index) got \(echoed)")
        }
        #expect(loopsSeen.withLock { $0.count } == 2)
    }

    /// Fast open on both ends: the connections work (the second carries its first bytes in
    /// the SYN once the kernel holds a cookie; the socket tests check the SYN itself).
    @Test func fastOpenConnectionsCarryData() async throws {
        let server = try await RunningStreamListener.start(TCP().fastOpenAllowed(true))
        defer { server.task.cancel() }
        for round in 0..<3 {
            let connection = NetworkConnection(to: server.endpoint) { TCP().fastOpenAllowed(true) }
            defer { connection.cancel() }
            try await connection.send(Data("tfo \(round)".utf8), endOfStream: true)
            #expect(try await receiveAll(connection) == Array("tfo \(round)".utf8))
        }
    }

    /// `.parameters { }.fastOpenAllowed(true)` is fast open on the stack's TCP, as
    /// `TCP().fastOpenAllowed(true)` is: the client socket sets TCP_FASTOPEN_CONNECT.
    @Test func fastOpenAllowedOnTheParametersReachesTheSocket() async throws {
        let server = try await RunningStreamListener.start(TCP().fastOpenAllowed(true))
        defer { server.task.cancel() }
        for allowed in [false, true] {
            let connection = NetworkConnection(to: server.endpoint, using: .parameters { TCP() }.fastOpenAllowed(allowed))
            defer { connection.cancel() }
            try await connection.send(Data("tfo".utf8))
            #expect(try await connection.receive(exactly: 3).content == Data("tfo".utf8))
            let option = try await connection.loop.submit { [core = connection.core] _ in
                core.value.byteStream.socketOptionForTesting(level: Int32(IPPROTO_TCP), name: 30)  // TCP_FASTOPEN_CONNECT
            }
            #expect(option == (allowed ? 1 : 0))
        }
    }

    /// The service class's DSCP mark is on the connection's socket (IP_TOS = DSCP << 2).
    @Test func serviceClassMarksTheSocket() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint, using: .parameters { TCP() }.serviceClass(.interactiveVoice))
        defer { connection.cancel() }
        try await connection.send(Data("ef".utf8))
        #expect(try await connection.receive(exactly: 2).content == Data("ef".utf8))
        let tos = try await connection.loop.submit { [core = connection.core] _ in core.value.byteStream.socketOptionForTesting(level: Int32(IPPROTO_IP), name: IP_TOS) }
        #expect(tos == Int32(NWParameters.ServiceClass.interactiveVoice.dscp) << 2)
    }
}
