import BraidIO
import Foundation
import Glibc
import Testing

@testable import Braid

/// TCP establishment against an address that never answers: a listening socket whose accept
/// queue is full drops every new SYN (Linux's default, `tcp_abort_on_overflow` 0), so a
/// connect there hangs as it would toward a host that is down or filtered.
@Suite(.serialized) struct TCPEstablishmentTests {
    /// A silent TCP address on `host` (an IP literal): bound, listening with a full queue.
    /// Keep the returned descriptors open while the address must stay silent.
    private func silentAddress(on host: String) throws -> (port: UInt16, descriptors: [Int32]) {
        let address = SocketAddress(ip: host, port: 0)!
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        // Close-on-exec: the interop tests spawn peers meanwhile, and a peer that inherited this
        // listener would be found listening on the silent port.
        let listener = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        var bound = address.withSockAddr { Glibc.bind(listener, $0, socklen_t($1)) }
        try #require(bound == 0, "bind: \(errno)")
        bound = Glibc.listen(listener, 0)
        try #require(bound == 0, "listen: \(errno)")
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = SocketAddress(storage: storage).port
        // Fill the accept queue (a backlog of 0 holds one connection; two to be sure).
        var descriptors = [listener]
        for _ in 0..<2 {
            let filler = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            _ = address.withPort(port).withSockAddr { Glibc.connect(filler, $0, socklen_t($1)) }
            descriptors.append(filler)
        }
        // The queue is full once the first filler's handshake completed (it turns writable);
        // waited for with a generous deadline, not a pause.
        var first = pollfd(fd: descriptors[1], events: Int16(POLLOUT), revents: 0)
        try #require(poll(&first, 1, 60_000) == 1, "the accept queue never filled")
        return (port, descriptors)
    }

    /// A name whose first address is silent: after RFC 8305's 250 ms the race tries the next
    /// address, and the connection is made there.
    @Test(.timeLimit(.minutes(3))) func happyEyeballsMovesPastASilentFirstAddress() async throws {
        let silent = try silentAddress(on: "127.0.0.1")
        defer { silent.descriptors.forEach { _ = Glibc.close($0) } }
        let listener = NetworkListener(for: .hostPort(host: "::1", port: NWEndpoint.Port(integerLiteral: silent.port))) { TCP() }
        let running = Task { try await listener.run(echoBytes) }
        defer { running.cancel() }
        try await listener.waitUntilReady()
        let name = "silent-first-\(silent.port).test"
        Resolver.namesForTesting.withLock {
            $0[name] = [SocketAddress(ip: "127.0.0.1", port: silent.port)!, SocketAddress(ip: "::1", port: silent.port)!]
        }
        defer { _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: name) } }
        let connection = NetworkConnection(to: .hostPort(host: .name(name), port: NWEndpoint.Port(integerLiteral: silent.port))) { TCP() }
        defer { connection.cancel() }
        try await connection.send(Data("past".utf8))
        #expect(try await connection.receive(exactly: 4).content == Data("past".utf8))
        #expect(connection.remoteEndpoint == .hostPort(host: "::1", port: NWEndpoint.Port(integerLiteral: silent.port)))
    }

    /// `TCP.connectionTimeout`: a connect that gets no answer fails with `noResponse` after the
    /// timeout, instead of waiting out the kernel's SYN retries (about two minutes).
    @Test(.timeLimit(.minutes(3))) func aSilentAddressFailsAfterTheConnectionTimeout() async throws {
        let silent = try silentAddress(on: "127.0.0.1")
        defer { silent.descriptors.forEach { _ = Glibc.close($0) } }
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: NWEndpoint.Port(integerLiteral: silent.port))
        let connection = NetworkConnection(to: endpoint) { TCP().connectionTimeout(1) }
        defer { connection.cancel() }
        await #expect(throws: NetworkError.noResponse(endpoint: "127.0.0.1:\(silent.port)", timeout: .seconds(1))) {
            try await connection.send(Data("x".utf8))
            _ = try await connection.receive(exactly: 1)
        }
        #expect(connection.state == .failed(.noResponse(endpoint: "127.0.0.1:\(silent.port)", timeout: .seconds(1))))
    }
}
