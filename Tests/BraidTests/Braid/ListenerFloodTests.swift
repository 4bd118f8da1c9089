import BraidCore
import BraidIO
import BraidTLS
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Braid

/// Listeners under floods of new peers: a UDP listener whose table one datagram from each of many
/// forged source addresses fills, a DTLS listener's hellos from many addresses, and TCP and TLS
/// listeners holding many connections that never send. Each time a legitimate new peer must be
/// served during and after the flood.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ListenerFloodTests {
    /// Over loopback: one datagram from each of 3,000 source addresses (127.1.x.y, each its own
    /// socket) against a listener of 1,000 places; a new peer is answered in the middle of the
    /// flood and right after it.
    @Test func aSpoofedSourceFloodOverLoopbackLocksNobodyOut() async throws {
        let limit = 1_000
        let (server, displaced) = try await startCountingEcho(limit: limit)
        defer { server.task.cancel() }
        let port = server.listener.port!.rawValue
        let rssBefore = residentBytes()
        try await offThePool { try sendFromManyAddresses(count: 1_500, firstIndex: 0, toPort: port) }
        let during = NetworkConnection(to: server.endpoint) { UDP() }
        defer { during.cancel() }
        let flood = Task { try await offThePool { try sendFromManyAddresses(count: 1_500, firstIndex: 1_500, toPort: port) } }
        #expect(try await udpEcho(Data("during".utf8), on: during)?.content == Data("during".utf8))
        try await flood.value
        let after = NetworkConnection(to: server.endpoint) { UDP() }
        defer { after.cancel() }
        #expect(try await udpEcho(Data("after".utf8), on: after)?.content == Data("after".utf8))
        // 3,000 peers passed through 1,000 places: at least 2,000 were displaced.
        let deadline = ContinuousClock.now + .seconds(60)
        while displaced.count < 2_000 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(displaced.count >= 2_000)
        print("UDP flood from 3,000 source addresses, 1,000 places: \(displaced.count) displaced; process RSS \(rssBefore >> 20) -> \(residentBytes() >> 20) MiB")
    }

    /// TLS slowloris: 1,000 TCP connections from 100 addresses that never send a ClientHello.
    /// The listener closes each at its handshake deadline (2 s here), serves a real client
    /// while they hold, and gives their memory back.
    @Test func tlsConnectionsThatNeverSendAClientHelloAreClosedAtTheDeadline() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            TLS().alpn(["echo"]).handshakeTimeout(.seconds(2)).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                let (content, _) = try await connection.receive(atLeast: 1, atMost: 65536)
                try await connection.send(content)
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let port = listener.port!.rawValue
        let rssBefore = residentBytes()
        let silent = try await offThePool { try (0..<1_000).map { try rawTCPConnection(from: "127.3.0.\($0 % 100 + 1)", toPort: port) } }
        defer { for fd in silent { close(fd) } }
        let client = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { testTLSClient() }
        defer { client.cancel() }
        try await client.send(Data("served".utf8))
        #expect(try await client.receive(exactly: 6).content == Data("served".utf8))
        let rssHolding = residentBytes()
        // Each silent connection ends from the listener's side: end of stream or a reset.
        var open = Set(silent)
        let deadline = ContinuousClock.now + .seconds(90)
        while !open.isEmpty && ContinuousClock.now < deadline {
            for fd in open {
                var byte: UInt8 = 0
                let got = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
                if got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { open.remove(fd) }
            }
            if !open.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(open.isEmpty, "\(open.count) of 1,000 silent connections still open")
        print("TLS slowloris, 1,000 silent connections: process RSS \(rssBefore >> 20) -> \(rssHolding >> 20) while held -> \(residentBytes() >> 20) MiB after")
    }

    /// DTLS: ClientHellos without a cookie from 2,000 addresses take no place (each gets a
    /// HelloVerifyRequest and no connection), so a listener of 10 places still serves a real
    /// client during the flood and after it.
    @Test func dtlsHellosFromManyAddressesTakeNoPlace() async throws {
        let accepted = ManagedCounter()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        listener.newConnectionLimit = 10
        let task = Task {
            try await listener.run { connection in
                accepted.increment()
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let port = listener.port!.rawValue
        let engine = try DTLSConnection.client(context: DTLSClientContext(configuration: TLSClientConfiguration()), serverName: "localhost")
        _ = try engine.process { _ in }
        let hello = try #require(engine.popDatagram())
        try await offThePool { try sendFromManyAddresses(count: 1_000, firstIndex: 0, toPort: port, payload: hello) }
        let flood = Task { try await offThePool { try sendFromManyAddresses(count: 1_000, firstIndex: 1_000, toPort: port, payload: hello) } }
        func echoOnce(_ text: String) async throws -> Data {
            let client = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) {
                DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
            }
            defer { client.cancel() }
            try await client.send(Data(text.utf8))
            return try await client.receive().content
        }
        #expect(try await echoOnce("during") == Data("during".utf8))
        try await flood.value
        #expect(try await echoOnce("after") == Data("after".utf8))
        #expect(accepted.value == 2, "only the two real clients got a connection")
    }

    /// TCP: 2,000 connections from 200 addresses that never send sit in a listener's table
    /// (accepted, each with its handler waiting for bytes) without filling the accept backlog
    /// or stopping the loop: a new client is echoed while they hold.
    @Test func tcpConnectionsThatNeverSendLeaveRoomForANewClient() async throws {
        let held = ManagedCounter()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { TCP() }
        let task = Task {
            try await listener.run { connection in
                held.increment()
                while true {
                    let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 65536)
                    try await connection.send(content)
                    if metadata.isEndOfStream || content.isEmpty { return }
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let port = listener.port!.rawValue
        let idle = try await offThePool { try (0..<2_000).map { try rawTCPConnection(from: "127.2.0.\($0 % 200 + 1)", toPort: port) } }
        defer { for fd in idle { close(fd) } }
        // Every idle connection reached the handler: the loop accepted them all.
        let deadline = ContinuousClock.now + .seconds(60)
        while held.value < 2_000 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(held.value == 2_000)
        let client = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { TCP() }
        defer { client.cancel() }
        try await client.send(Data("still served".utf8))
        let (echoed, _) = try await client.receive(exactly: 12)
        #expect(echoed == Data("still served".utf8))
    }
}

/// A UDP listener's table full of one-datagram peers from forged addresses, in memory
/// (`MemoryWorld`), apart from the loopback floods so it waits for a world's turn alone.
@Suite(.timeLimit(.minutes(10))) struct ForgedPeerDisplacementTests {
    /// In memory: the table full of one-datagram peers from forged addresses, a new peer takes
    /// the place of the oldest of them, during the flood and after it; a peer that proved itself
    /// before the flood (it sent again after the echo) keeps its place throughout.
    @Test func forgedOneDatagramPeersGiveWayToANewPeer() async throws {
        try await MemoryWorld.run { world in
            let limit = 50
            let (server, displaced) = try await startCountingEcho(limit: limit)
            defer { server.task.cancel() }
            let target = SocketAddress(ip: "127.0.0.1", port: server.listener.port!.rawValue)!
            let network = world.network
            func flood(_ range: Range<Int>) async throws {
                try await world.loop.submit { context in
                    for index in range {
                        let forged = SocketAddress(ip: "127.1.\(index / 250).\(index % 250 + 1)", port: 40_000)!
                        network.send(Array("flood \(index)".utf8), from: forged, to: target, ecn: .notECT, context: context)
                    }
                }
            }

            // A peer that proves itself: its second datagram comes after the listener's echo.
            let proven = NetworkConnection(to: server.endpoint) { UDP() }
            defer { proven.cancel() }
            #expect(try await udpEcho(Data("one".utf8), on: proven, in: world)?.content == Data("one".utf8))
            #expect(try await udpEcho(Data("two".utf8), on: proven, in: world)?.content == Data("two".utf8))

            // Three tables' worth of forged peers: the table is full of them.
            try await flood(0..<(3 * limit))
            let during = NetworkConnection(to: server.endpoint) { UDP() }
            defer { during.cancel() }
            #expect(try await udpEcho(Data("during".utf8), on: during, in: world)?.content == Data("during".utf8))
            try await flood((3 * limit)..<(6 * limit))
            let after = NetworkConnection(to: server.endpoint) { UDP() }
            defer { after.cancel() }
            #expect(try await udpEcho(Data("after".utf8), on: after, in: world)?.content == Data("after".utf8))
            #expect(try await udpEcho(Data("three".utf8), on: proven, in: world)?.content == Data("three".utf8))

            // The forged peers made room; the proven peer never did.
            #expect(try await world.eventually { displaced.count >= 5 * limit - 2 })
            #expect(!displaced.contains(try #require(proven.localEndpoint).description))
        }
    }
}

/// A UDP echo listener that counts its connections that ended with `serverBusy` (displaced
/// to make room), by remote endpoint.
private func startCountingEcho(limit: Int) async throws -> (RunningUDPEcho, Displaced) {
    let displaced = Displaced()
    let server = try await RunningUDPEcho.start(limit: limit) { connection in
        do {
            for try await (content, _) in connection.messages { try await connection.send(content) }
        } catch {}
        // The messages end when the connection does; its state then says why.
        for await state in connection.states {
            if case .failed(.serverBusy) = state { displaced.add(connection.endpoint) }
        }
    }
    return (server, displaced)
}

/// Endpoints whose connections a listener displaced, from any task.
private final class Displaced: Sendable {
    private let endpoints = Mutex<[String]>([])
    func add(_ endpoint: NWEndpoint) { endpoints.withLock { $0.append(endpoint.description) } }
    var count: Int { endpoints.withLock { $0.count } }
    func contains(_ description: String) -> Bool { endpoints.withLock { $0.contains(description) } }
}

/// Sends `payload` once to 127.0.0.1:`port` from each of `count` addresses 127.1.x.y (Linux
/// routes all of 127.0.0.0/8 to loopback, so any of them can be bound without setup), each
/// from its own socket, closed at once.
private func sendFromManyAddresses(count: Int, firstIndex: Int, toPort port: UInt16, payload: [UInt8] = Array("flood".utf8)) throws {
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = port.bigEndian
    target.sin_addr.s_addr = inet_addr("127.0.0.1")
    for index in firstIndex..<(firstIndex + count) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetworkError.system(call: "socket", errno: errno) }
        defer { close(fd) }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr("127.1.\(index / 250).\(index % 250 + 1)")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw NetworkError.system(call: "bind", errno: errno) }
        let sent = payload.withUnsafeBytes { bytes in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == payload.count else { throw NetworkError.system(call: "sendto", errno: errno) }
    }
}

