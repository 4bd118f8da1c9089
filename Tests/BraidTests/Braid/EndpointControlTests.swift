import Dispatch
import Foundation
import Glibc
import Testing

@testable import Braid
import BraidCore

/// `currentPath`, `tryNextEndpoint()` and the classic `cancelCurrentEndpoint()` and
/// `forceCancel()`, over real sockets: a silent address is a kernel's dropped SYNs, and a
/// reset is what the peer's socket reports.
@Suite(.timeLimit(.minutes(3))) struct EndpointControlTests {
    @Test func currentPathHasTheEndpointsOnceReadyAndTheWatchedPathOnceReported() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { TCP() }
        #expect(connection.currentPath == nil)
        try await connection.send(Data("path".utf8))
        _ = try await connection.receive(exactly: 4)
        let path = try #require(connection.currentPath)
        #expect(path.status == .satisfied)
        #expect(path.remoteEndpoint == server.endpoint)
        #expect(path.localEndpoint == connection.localEndpoint)
        #expect(path.supportsIPv4 && !path.supportsIPv6)

        // Once the connection watches its path, `currentPath` is the path it reported, with
        // the interface that holds its address (loopback).
        let (reported, continuation) = AsyncStream<NWPath>.makeStream()
        connection.onPathUpdate { _, path in continuation.yield(path) }
        let first = try await withDeadline(.seconds(60)) {
            for await path in reported { return path }
            return nil
        }
        let watched = try #require(first)
        #expect(watched.usesInterfaceType(.loopback))
        #expect(connection.currentPath == watched)
        await connection.close()
        #expect(connection.currentPath == watched)
    }

    /// A name with two addresses, the first silent: the attempt on it would wait for its
    /// 600 s connect timeout, and Happy Eyeballs' next attempt is held back for an hour for
    /// this port, so only `tryNextEndpoint()` brings the connection to the second address.
    @Test func tryNextEndpointLeavesASilentAddressForTheNextOne() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let port = server.port.rawValue
        let silent = try SilentTCPPort(address: "127.0.0.2", port: port)
        let name = "silent-first-\(port).braid.test"
        Resolver.namesForTesting.withLock {
            $0[name] = [SocketAddress(ip: "127.0.0.2", port: 0)!, SocketAddress(ip: "127.0.0.1", port: 0)!]
        }
        ClientEstablishment.attemptDelaysForTesting.withLock { $0[port] = .seconds(3600) }
        defer {
            Resolver.namesForTesting.withLock { $0[name] = nil }
            ClientEstablishment.attemptDelaysForTesting.withLock { $0[port] = nil }
        }
        let connection = NetworkConnection(to: .hostPort(host: .name(name), port: server.port)) { TCP().connectionTimeout(600) }
        defer { connection.cancel() }
        connection.start()
        // The name is one of the tests' fixed ones, resolved without a lookup: the first
        // attempt is in flight before this call reaches the loop.
        connection.tryNextEndpoint()
        try await connection.send(Data("second".utf8))
        #expect(try await connection.receive(exactly: 6).content == Data("second".utf8))
        #expect(connection.remoteEndpoint == .hostPort(host: "127.0.0.1", port: server.port))
        withExtendedLifetime(silent) {}
    }

    /// UDP has no handshake, so a connection is ready on the first address with a route, and
    /// Network.framework's answer to a peer that does not answer there is to reject the
    /// endpoint: the ready connection moves to the next address, in both dialects.
    @Test func aReadyUDPConnectionMovesToTheNextAddress() async throws {
        let peers = EndpointLog()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { UDP() }
        let task = Task {
            try await listener.run { connection in
                peers.append(connection.endpoint)
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        defer { task.cancel() }
        for await state in listener.states where state == .ready { break }
        let port = try #require(listener.port)
        // A socket on the first address that never answers (without it, the kernel's port
        // unreachable would end the connection instead).
        let silent = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(silent) }
        #expect(SocketAddress(ip: "127.0.0.2", port: port.rawValue)!.withSockAddr { bind(silent, $0, socklen_t($1)) } == 0)
        let name = "silent-udp-\(port).braid.test"
        Resolver.namesForTesting.withLock {
            $0[name] = [SocketAddress(ip: "127.0.0.2", port: 0)!, SocketAddress(ip: "127.0.0.1", port: 0)!]
        }
        defer { Resolver.namesForTesting.withLock { $0[name] = nil } }

        let connection = NetworkConnection(to: .hostPort(host: .name(name), port: port)) { UDP() }
        defer { connection.cancel() }
        try await connection.send(Data("anyone?".utf8))
        #expect(connection.remoteEndpoint == .hostPort(host: "127.0.0.2", port: port))
        var received = [UInt8](repeating: 0, count: 16)
        #expect(received.withUnsafeMutableBytes { recv(silent, $0.baseAddress, $0.count, 0) } == 7)
        // The move runs on the connection's loop before the send's pass, which it posts after.
        connection.tryNextEndpoint()
        try await connection.send(Data("hello".utf8))
        let (echoed, metadata) = try await connection.receive()
        #expect(echoed == Data("hello".utf8))
        #expect(metadata.remoteEndpoint == .hostPort(host: "127.0.0.1", port: port))
        #expect(connection.remoteEndpoint == .hostPort(host: "127.0.0.1", port: port))

        let classic = NWConnection(to: .hostPort(host: .name(name), port: port), using: .udp)
        defer { classic.cancel() }
        let states = StateRecorder(classic)
        classic.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        classic.cancelCurrentEndpoint()
        #expect(await classic.sendAsync(Data("classic".utf8)) == nil)
        let answer = await classic.receiveMessageAsync()
        #expect(answer.content == Data("classic".utf8))
    }

    /// The classic `cancelCurrentEndpoint()` on the only address: the connection waits, as
    /// Network.framework's does when no endpoint is left.
    @Test func cancelCurrentEndpointOnTheLastAddressWaits() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let silent = try SilentTCPPort(address: "127.0.0.2", port: server.port.rawValue)
        let tcp = NWProtocolTCP.Options()
        tcp.connectionTimeout = 600
        let connection = NWConnection(host: "127.0.0.2", port: server.port, using: NWParameters(tls: nil, tcp: tcp))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        // An IP literal is attempted in the loop pass `start` posts, before this one.
        connection.cancelCurrentEndpoint()
        let waiting = try await states.wait(for: "waiting") { if case .waiting = $0 { true } else { false } }
        #expect(waiting == .waiting(.posix(.ECANCELED)))
        withExtendedLifetime(silent) {}
    }

    /// `forceCancel()` aborts: the peer's read fails with a reset instead of reading the end
    /// of the stream (TCP) or close_notify (TLS), and a pending receive completes with
    /// ECANCELED.
    @Test(arguments: ["tcp", "tls"]) func forceCancelResetsThePeer(_ kind: String) async throws {
        let (outcomes, continuation) = AsyncStream<Result<Data, NetworkError>>.makeStream()
        // The reset may overtake the client's first bytes (a completed classic send is queued,
        // not yet written), so either receive may be the one that meets it.
        @Sendable func readUntilTheEnd<P: StreamProtocol>(_ connection: NetworkConnection<P>) async throws {
            do {
                _ = try await connection.receive(exactly: 5)
                let (content, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                continuation.yield(.success(content))
            } catch {
                continuation.yield(.failure(NetworkError(error)))
            }
        }
        let port: NWEndpoint.Port
        let task: Task<Void, any Error>
        let parameters: NWParameters
        if kind == "tcp" {
            let server = try await RunningStreamListener.start(TCP(), handler: readUntilTheEnd)
            (port, task, parameters) = (server.port, server.task, .tcp)
        } else {
            let server = try await RunningStreamListener.start(testTLSServer(), handler: readUntilTheEnd)
            (port, task, parameters) = (server.port, server.task, NWConnectionTLSTests.parameters(alpn: ["echo"]))
        }
        defer { task.cancel() }
        let connection = NWConnection(host: kind == "tcp" ? "127.0.0.1" : "localhost", port: port, using: parameters)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("hello".utf8), isComplete: false) == nil)
        let pending = Task { await connection.receiveAsync() }
        connection.forceCancel()
        let receive = await pending.value
        #expect(receive.error == .posix(.ECANCELED))
        try await states.wait(for: "cancelled") { $0 == .cancelled }
        let outcome = try await withDeadline(.seconds(60)) {
            for await outcome in outcomes { return outcome }
            return nil
        }
        #expect(outcome == .failure(.connectionReset))
    }

    @Test func forceCancelOnUDPEndsAPendingReceive() async throws {
        let server = try ClassicEchoServer(.udp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .udp)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let pending = Task { await connection.receiveMessageAsync() }
        connection.forceCancel()
        #expect(await pending.value.error == .posix(.ECANCELED))
        try await states.wait(for: "cancelled") { $0 == .cancelled }
    }
}
