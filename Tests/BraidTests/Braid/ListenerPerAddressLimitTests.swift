import Foundation
import Glibc
import Testing

@testable import Braid

/// TCP and TLS listeners' limit of connections per client address
/// (`TCP.newConnectionLimitPerAddress(_:)`): one address gets that many places and no more,
/// the others are reset at once, other addresses are served, and a place comes back when its
/// connection ends.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ListenerPerAddressLimitTests {
    @Test func theDefaultIsOneThousand() {
        #expect(TCP().newConnectionLimitPerAddress == 1_000)
        #expect(TLS().tcp.newConnectionLimitPerAddress == 1_000)
    }

    @Test func aNegativeLimitIsRefused() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP().newConnectionLimitPerAddress(-1) }
        let task = Task { try await listener.run { _ in } }
        defer { task.cancel() }
        for await state in listener.states {
            if case .failed(let error) = state {
                #expect("\(error)".contains("newConnectionLimitPerAddress"), "\(error)")
                return
            }
            if state == .ready { break }
        }
        Issue.record("the listener started with a negative per-address limit")
    }

    /// 15 connections from 127.4.0.1 to a TCP echo listener allowing 10 per address: 10 echo,
    /// 5 are reset; 127.0.0.1 is served; once the 10 close, the address is served again.
    @Test func tcpListenerResetsConnectionsPastTheAddressLimit() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP().newConnectionLimitPerAddress(10) }
        let task = Task {
            try await listener.run { connection in
                while true {
                    // Empty at the end of the stream: the client is gone.
                    let (content, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                    if content.isEmpty { return }
                    try await connection.send(content)
                }
            }
        }
        defer { task.cancel() }
        let port = try await readyPort(listener)
        let fds = try (0..<15).map { _ in try rawTCPConnection(from: "127.4.0.1", toPort: port) }
        defer { for fd in fds { close(fd) } }
        let outcomes = try await offThePool { fds.map { echoes(fd: $0, deadline: .now() + 60) } }
        #expect(outcomes.filter { $0 == .echoed }.count == 10, "\(outcomes)")
        #expect(outcomes.filter { $0 == .ended }.count == 5, "\(outcomes)")

        let other = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) { TCP() }
        defer { other.cancel() }
        try await other.send(Data("other".utf8))
        #expect(try await other.receive(exactly: 5).content == Data("other".utf8))

        // The places come back as the connections end (the listener learns of each close on
        // its loop): a new connection from the address is served before the deadline.
        for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) }
        let deadline = ContinuousClock.now + .seconds(30)
        var served = false
        while !served && ContinuousClock.now < deadline {
            let fd = try rawTCPConnection(from: "127.4.0.1", toPort: port)
            served = try await offThePool { echoes(fd: fd, deadline: .now() + 10) } == .echoed
            close(fd)
            if !served { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(served, "no place came back for 127.4.0.1 after its connections closed")
    }

    /// 15 connections from 127.4.0.2 that never send a ClientHello, to a TLS listener allowing
    /// 10 per address (handshake deadline 60 s, so the 10 stay): 5 are reset at once, and a
    /// TLS client from 127.0.0.1 is served meanwhile.
    @Test func tlsListenerResetsConnectionsPastTheAddressLimit() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            TLS { TCP().newConnectionLimitPerAddress(10) }.alpn(["echo"]).handshakeTimeout(.seconds(60)).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                let (content, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                try await connection.send(content)
            }
        }
        defer { task.cancel() }
        let port = try await readyPort(listener)
        let fds = try (0..<15).map { _ in try rawTCPConnection(from: "127.4.0.2", toPort: port) }
        defer { for fd in fds { close(fd) } }
        var ended = Set<Int32>()
        let deadline = ContinuousClock.now + .seconds(50)
        while ended.count < 5 && ContinuousClock.now < deadline {
            for fd in fds where !ended.contains(fd) && hasEnded(fd: fd) { ended.insert(fd) }
            if ended.count < 5 { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(ended.count == 5, "\(ended.count) of 15 connections from one address ended")
        let client = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) { testTLSClient() }
        defer { client.cancel() }
        try await client.send(Data("served".utf8))
        #expect(try await client.receive(exactly: 6).content == Data("served".utf8))
        // The 10 admitted are still open (their handshake deadline is far off).
        #expect(fds.filter { hasEnded(fd: $0) }.count == 5)
    }

    /// The classic API's `NWProtocolTCP.Options.newConnectionLimitPerAddress` (default 1,000
    /// as in the new API): an `NWListener` allowing 3 per address serves 3 of 6 connections from
    /// 127.4.0.3 and resets the other 3.
    @Test func classicTCPOptionsCarryTheAddressLimit() async throws {
        #expect(NWProtocolTCP.Options().newConnectionLimitPerAddress == 1_000)
        let tcp = NWProtocolTCP.Options()
        tcp.newConnectionLimitPerAddress = 3
        #expect((tcp.copy() as? NWProtocolTCP.Options)?.newConnectionLimitPerAddress == 3)
        let server = try ClassicEchoServer(NWParameters(tls: nil, tcp: tcp))
        let port = try await server.start().rawValue
        defer { server.listener.cancel() }
        let fds = try (0..<6).map { _ in try rawTCPConnection(from: "127.4.0.3", toPort: port) }
        defer { for fd in fds { close(fd) } }
        let outcomes = try await offThePool { fds.map { echoes(fd: $0, deadline: .now() + 60) } }
        #expect(outcomes.filter { $0 == .echoed }.count == 3, "\(outcomes)")
        #expect(outcomes.filter { $0 == .ended }.count == 3, "\(outcomes)")
    }

    private func readyPort<P: NetworkProtocol>(_ listener: NetworkListener<P>) async throws -> UInt16 {
        try await listener.waitUntilReady()
        return try #require(listener.port).rawValue
    }
}

private enum EchoOutcome: Sendable, Equatable { case echoed, ended, timedOut }

/// Sends one byte on `fd` and waits (poll, up to `deadline`) for it back or for the end.
private func echoes(fd: Int32, deadline: DispatchTime) -> EchoOutcome {
    var byte: UInt8 = 0x2a
    guard send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 else { return .ended }
    while DispatchTime.now() < deadline {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 100) > 0 else { continue }
        var back: UInt8 = 0
        let got = recv(fd, &back, 1, 0)
        return got == 1 && back == 0x2a ? .echoed : .ended
    }
    return .timedOut
}

/// Whether the listener ended `fd`'s connection (end of stream or a reset), without waiting.
private func hasEnded(fd: Int32) -> Bool {
    var byte: UInt8 = 0
    let got = recv(fd, &byte, 1, Int32(MSG_DONTWAIT) | Int32(MSG_PEEK))
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
}

