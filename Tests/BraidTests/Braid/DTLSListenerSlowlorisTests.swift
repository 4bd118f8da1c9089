import BraidCore
import BraidIO
import BraidTLS
import Foundation
import Glibc
import Testing

@testable import Braid

/// A DTLS listener under a slowloris: clients that pass the cookie exchange (so each takes a
/// place) and then never answer the listener's flight.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DTLSListenerSlowlorisTests {
    /// Five clients stall their handshakes after the cookie, on a listener of six places whose
    /// handshake deadline is 15 s (long enough that they still hold when the clients come on a
    /// loaded machine). Two legitimate clients then start together: one takes the
    /// sixth place and is echoed while the stalled handshakes hold theirs; the other is refused
    /// (its hello retransmitted) until the listener drops the stalled handshakes at their
    /// deadline, and then gets in. The stalled clients' connections end having delivered
    /// nothing.
    @Test func stalledHandshakesHoldTheirPlacesOnlyUntilTheDeadline() async throws {
        // The handler gets each connection as it is taken; a stalled one's messages end at the
        // handshake deadline with nothing delivered, a client's first message is echoed.
        let taken = ManagedCounter(), served = ManagedCounter(), endedEmpty = ManagedCounter()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).handshakeTimeout(.seconds(15)).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        listener.newConnectionLimit = 6
        let task = Task {
            try await listener.run { connection in
                taken.increment()
                var delivered = false
                do {
                    for try await (content, _) in connection.messages {
                        if !delivered { served.increment() }
                        delivered = true
                        try await connection.send(content)
                    }
                } catch {}
                // Ended (a stalled one: dropped at the handshake deadline) with nothing delivered.
                if !delivered { endedEmpty.increment() }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let port = listener.port!.rawValue
        let budget = try #require(listener.bufferBudget.withLock { $0 })

        let stalled = try await offThePool { try (0..<5).map { _ in try stallAfterTheCookie(port: port) } }
        defer { for fd in stalled { close(fd) } }
        // The listener took the five (their hellos carried the cookie) before anyone else.
        let holding = ContinuousClock.now + .seconds(60)
        while taken.value < stalled.count && ContinuousClock.now < holding { try await Task.sleep(for: .milliseconds(20)) }
        #expect(taken.value == stalled.count)
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: listener.port!)
        let clients = (0..<2).map { _ in
            NetworkConnection(to: endpoint) {
                DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
            }
        }
        defer { for client in clients { client.cancel() } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    let echoed = try await echo(Data("client \(index)".utf8), on: client)
                    #expect(echoed == Data("client \(index)".utf8))
                }
            }
            try await group.waitForAll()
        }
        // One of them found the listener full of stalled handshakes.
        #expect(budget.refusedConnections >= 1, "no hello was refused: the stalled handshakes took no place")
        // Both still served, and only they reached the application.
        for client in clients {
            #expect(try await echo(Data("again".utf8), on: client) == Data("again".utf8))
        }
        #expect(served.value == 2, "\(served.value) connections delivered a message")
        let deadline = ContinuousClock.now + .seconds(60)
        while endedEmpty.value < stalled.count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(endedEmpty.value == stalled.count, "\(endedEmpty.value) connections ended having delivered nothing")
    }
}

/// A DTLS client on its own UDP socket (127.0.0.1, any port) that sends a ClientHello, answers
/// the HelloVerifyRequest with the cookie, and then goes quiet. Returns the socket, open.
private func stallAfterTheCookie(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw NetworkError.system(call: "socket", errno: errno) }
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = port.bigEndian
    target.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &target) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        throw NetworkError.system(call: "connect", errno: errno)
    }
    // A generous wait for the listener's answer on a loaded machine.
    var wait = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    let engine = try DTLSConnection.client(context: DTLSClientContext(configuration: TLSClientConfiguration()), serverName: "localhost")
    func flush() throws {
        _ = try engine.process { _ in }
        while let datagram = engine.popDatagram() {
            _ = datagram.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
        }
    }
    try flush()
    var buffer = [UInt8](repeating: 0, count: 2048)
    let got = recv(fd, &buffer, buffer.count, 0)
    guard got > 0 else {
        close(fd)
        throw NetworkError.system(call: "recv", errno: errno)
    }
    // The HelloVerifyRequest: the engine answers it with the ClientHello carrying the cookie.
    buffer.withUnsafeBytes { _ = engine.receiveDatagram(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
    try flush()
    return fd
}

/// Sends `message` on `client` until its echo comes back (a datagram, or its echo, can be
/// lost on a loaded machine), again every 2 s, 60 times at most; nil if none came. Echoes of
/// earlier messages are skipped.
private func echo(_ message: Data, on client: NetworkConnection<DTLS>) async throws -> Data? {
    try await withThrowingTaskGroup(of: Data?.self) { group in
        group.addTask {
            while true {
                let content = try await client.receive().content
                if content == message { return content }
            }
        }
        group.addTask {
            for _ in 0..<60 {
                try await client.send(message)
                try await Task.sleep(for: .seconds(2))
            }
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

