import BraidCore
import BraidIO
import Foundation
import Glibc
import Testing

@testable import Braid

/// The three attacks on a listener, against the stacks over TCP where their own tests do not
/// already prove both halves (the bound, and a legitimate client served during the attack):
/// TCP and TLS, WebSocket over TCP and over TLS, and a custom framer (TLV) over TCP and TLS.
///
/// - Slowloris: connections that trickle their handshake (a TLS record, a WebSocket upgrade)
///   a byte at a time are closed at the handshake deadline, having delivered nothing.
/// - Flood: connections from a few addresses, faster than anyone is served, are held to the
///   per-address limit; the rest are reset at once.
/// - A peer that never reads what the application sends it, and one whose application never
///   reads what it sends: the connection holds bytes without draining them, and the listener
///   closes it at its buffer limit.
@Suite(.serialized, .timeLimit(.minutes(10))) struct StreamListenerAttackTests {
    /// A stack over TCP, as the tests start it.
    enum Stack: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case tcp, tls, webSocketOverTCP, webSocketOverTLS, tlvOverTCP, tlvOverTLS

        var testDescription: String { rawValue }

        /// A TLS server of the test certificate over `tcp`.
        private static func tlsServer(_ tcp: TCP, handshakeTimeout: Duration) -> TLS {
            TLS { tcp }.alpn(["echo"]).handshakeTimeout(handshakeTimeout)
                .identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }

        /// A listener of this stack on 127.0.0.1, running `handler` on each connection.
        func listen(
            perAddress: Int = TCP().newConnectionLimitPerAddress, handshakeTimeout: Duration = testHandshakeTimeout,
            bufferLimit: Int? = nil, handler: @escaping @Sendable (StreamPeer) async throws -> Void
        ) async throws -> AttackedListener {
            let tcp = TCP().newConnectionLimitPerAddress(perAddress)
            let tls = Self.tlsServer(tcp, handshakeTimeout: handshakeTimeout)
            switch self {
            case .tcp: return try await AttackedListener.start(tcp, bufferLimit: bufferLimit, wrap: StreamPeer.init(bytes:), handler: handler)
            case .tls: return try await AttackedListener.start(tls, bufferLimit: bufferLimit, wrap: StreamPeer.init(bytes:), handler: handler)
            case .webSocketOverTCP:
                return try await AttackedListener.start(WebSocket { tcp }, bufferLimit: bufferLimit, wrap: StreamPeer.init(webSocket:), handler: handler)
            case .webSocketOverTLS:
                return try await AttackedListener.start(WebSocket { tls }, bufferLimit: bufferLimit, wrap: StreamPeer.init(webSocket:), handler: handler)
            case .tlvOverTCP: return try await AttackedListener.start(TLV { tcp }, bufferLimit: bufferLimit, wrap: StreamPeer.init(tlv:), handler: handler)
            case .tlvOverTLS: return try await AttackedListener.start(TLV { tls }, bufferLimit: bufferLimit, wrap: StreamPeer.init(tlv:), handler: handler)
            }
        }

        /// A legitimate client of this stack.
        func client(to endpoint: NWEndpoint) -> StreamPeer {
            switch self {
            case .tcp: StreamPeer(bytes: NetworkConnection(to: endpoint) { TCP() })
            case .tls: StreamPeer(bytes: NetworkConnection(to: endpoint) { testTLSClient() })
            case .webSocketOverTCP: StreamPeer(webSocket: NetworkConnection(to: endpoint) { WebSocket { TCP() } })
            case .webSocketOverTLS: StreamPeer(webSocket: NetworkConnection(to: endpoint) { WebSocket { testTLSClient() } })
            case .tlvOverTCP: StreamPeer(tlv: NetworkConnection(to: endpoint) { TLV { TCP() } })
            case .tlvOverTLS: StreamPeer(tlv: NetworkConnection(to: endpoint) { TLV { testTLSClient() } })
            }
        }

        /// Whether the stack has a handshake of its own over TCP (TLS's, or a WebSocket upgrade).
        var hasHandshake: Bool { self != .tcp && self != .tlvOverTCP }
    }

    // MARK: Slowloris

    /// Twenty connections trickle their handshake, a byte every 200 ms, and never finish it:
    /// TLS a ClientHello's record, WebSocket its upgrade request (over TLS, after a real TLS
    /// handshake). A legitimate client is echoed while they trickle; the listener closes each
    /// of them at its handshake deadline (5 s; WebSocket over plain TCP: TLS's default, 10 s):
    /// the application's receive on each fails with `noResponse`, having delivered nothing.
    /// (The deadline is everyone's: on a loaded machine a client's own handshake can miss it,
    /// and the client then connects again.)
    @Test(arguments: Stack.allCases.filter(\.hasHandshake))
    func aTrickledHandshakeIsClosedAtTheDeadline(_ stack: Stack) async throws {
        // The handler gets each connection as it is accepted; a trickler's first receive
        // fails with the handshake deadline, a client's returns its message.
        let served = ManagedCounter(), timedOut = ManagedCounter()
        let server = try await stack.listen(handshakeTimeout: .seconds(5)) { peer in
            let first: Data
            do {
                first = try await peer.receive(7)
            } catch NetworkError.noResponse(_, _) {
                timedOut.increment()
                return
            }
            served.increment()
            try await peer.send(first)
            try await Self.echo(peer)
        }
        defer { server.task.cancel() }
        let tricklers = (0..<20).map { _ in Trickler(stack: stack, to: server.endpoint) }
        defer { for trickler in tricklers { trickler.cancel() } }
        let ended = ManagedCounter()
        let trickling = tricklers.map { trickler in
            Task {
                if await trickler.trickleUntilClosed() { ended.increment() }
            }
        }
        defer { for task in trickling { task.cancel() } }

        // Served while they trickle (over TLS the tricklers' own handshakes come first).
        var missed = try await Self.echoServed(stack, at: server.endpoint, Data("echo me".utf8))

        // Every trickler is closed by the listener (a bounded wait; nothing timed).
        for task in trickling { await task.value }
        #expect(ended.value == tricklers.count, "\(tricklers.count - ended.value) tricklers were never closed")
        // And a client after them is served too.
        missed += try await Self.echoServed(stack, at: server.endpoint, Data("echo it".utf8))
        #expect(served.value == 2, "\(served.value) connections delivered a message")
        let failed = ContinuousClock.now + .seconds(60)
        while timedOut.value < tricklers.count + missed && ContinuousClock.now < failed { try await Task.sleep(for: .milliseconds(50)) }
        #expect(timedOut.value == tricklers.count + missed, "\(timedOut.value) handlers saw the handshake deadline")
    }

    // MARK: Flood

    /// 60 connections as fast as they connect, ten from each of six addresses, to a listener
    /// allowing five per address: each address keeps five and the other five are reset at once
    /// (TLS's and TLV's connections send nothing, WebSocket over TCP a whole upgrade request,
    /// so that the five it keeps are upgraded and handed to the application). A legitimate
    /// client from another address is echoed while the flood holds its places.
    @Test(arguments: [Stack.webSocketOverTCP, .webSocketOverTLS, .tlvOverTCP, .tlvOverTLS])
    func aFloodIsHeldToTheAddressLimit(_ stack: Stack) async throws {
        let perAddress = 5, addresses = 6, each = 10
        let handled = ManagedCounter()
        let server = try await stack.listen(perAddress: perAddress) { peer in
            handled.increment()
            try await Self.echo(peer)
        }
        defer { server.task.cancel() }
        let port = server.port.rawValue
        let opening = stack == .webSocketOverTCP ? Array(Self.upgradeRequest.utf8) : []
        let flood = try await offThePool {
            try (0..<(addresses * each)).map { index in
                let fd = try rawTCPConnection(from: "127.6.0.\(index % addresses + 1)", toPort: port)
                if !opening.isEmpty { _ = opening.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
                return (address: index % addresses, fd: fd)
            }
        }
        defer { for connection in flood { close(connection.fd) } }

        // The connections past the limit are reset; the others stay (a bounded wait).
        var open = flood
        let deadline = ContinuousClock.now + .seconds(90)
        while open.count > addresses * perAddress && ContinuousClock.now < deadline {
            open.removeAll { endedByPeer($0.fd) }
            if open.count > addresses * perAddress { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(open.count == addresses * perAddress, "\(open.count) of \(flood.count) still open")
        for address in 0..<addresses {
            #expect(open.filter { $0.address == address }.count == perAddress, "address \(address)")
        }

        // Served while the flood holds its places.
        let client = stack.client(to: server.endpoint)
        defer { client.cancel() }
        try await client.send(Data("echo me".utf8))
        #expect(try await client.receive(7) == Data("echo me".utf8))
        // The application was handed the connections kept and the client, none of those reset.
        let reached = ContinuousClock.now + .seconds(60)
        while handled.value < addresses * perAddress + 1 && ContinuousClock.now < reached { try await Task.sleep(for: .milliseconds(50)) }
        #expect(handled.value == addresses * perAddress + 1, "\(handled.value) connections handled")
        #expect(open.allSatisfy { !endedByPeer($0.fd) }, "the listener closed connections within the limit")
    }

    // MARK: Peers that never read

    /// Who does not read.
    enum NonReader: String, CaseIterable, Sendable {
        /// The client never reads what the application sends it (16 KiB messages from four
        /// tasks, without end).
        case client
        /// The application never reads what the client sends it (1 MiB messages, without end).
        case application
    }

    /// What the listener's handlers saw, from any task.
    final class Outcomes: Sendable {
        private let ended = Locked<[NetworkError]>([])
        /// How the hostile connection's handler went: started holding, or ended and why.
        private let hostile = Locked<[String]>([])
        func add(_ error: NetworkError) { ended.withLock { $0.append(error) } }
        var serverBusy: Int {
            ended.withLock { $0.filter { if case .serverBusy = $0 { true } else { false } }.count }
        }
        func noteHostile(_ event: String) { hostile.withLock { $0.append(event) } }
        /// The hostile connection's handler has started (its connection came up and its first
        /// message arrived).
        var hostileStarted: Bool { hostile.withLock { !$0.isEmpty } }
        /// The hostile connection's handler has ended, for whatever reason.
        var hostileEnded: Bool { hostile.withLock { $0.count > 1 } }
        /// Bytes the handler has sent the hostile connection so far.
        private let sent = Locked(0)
        func noteSent(_ count: Int) { sent.withLock { $0 += count } }
        /// What the listener saw of the hostile connection, for a failure's message.
        var hostileHistory: String {
            let events = hostile.withLock { $0.isEmpty ? "its handler never got its first message" : $0.joined(separator: "; ") }
            return "\(events); the handler sent it \(sent.withLock { $0 }) bytes"
        }
    }

    static let nonReaderCases = Stack.allCases.flatMap { stack in NonReader.allCases.map { (stack, $0) } }

    /// A client connected before the attack is echoed; then a peer that never reads (or whose
    /// application never reads) makes its connection hold what cannot drain, past the
    /// listener's buffer limit (32 KiB). The first client is echoed while it holds; the
    /// listener closes the holder (`serverBusy` in its handler) and is back under its limit;
    /// the first client and a new one are served after.
    @Test(arguments: nonReaderCases)
    func aPeerThatNeverReadsIsClosedAtTheBufferLimit(_ stack: Stack, _ nonReader: NonReader) async throws {
        // Well below what one such connection comes to hold (what the kernel's buffers, whose
        // size varies, leave in its outbox; or its receive buffer).
        let limit = 32 << 10
        let outcomes = Outcomes()
        let chunk = Data(repeating: 0x5A, count: 1 << 20)
        // What the handler sends a client that never reads, from four tasks at once: once the
        // kernel's buffers are full, a send waits until its bytes are with the socket, and the
        // sends behind it wait queued, and counted, so the connection holds at least three
        // whole ones (48 KiB). One sender alone could be left waiting on the unwritten rest of
        // its last send, which can be any size down to a few bytes (the kernel took the rest:
        // how much varies), and the connection would hold less than the limit.
        let answer = Data(repeating: 0x5A, count: 16 << 10)
        let senders = 4
        let server = try await stack.listen(bufferLimit: limit) { peer in
            var isHostile = false
            do {
                let first = try await peer.receive(7)
                if first.first == UInt8(ascii: "e") {
                    try await peer.send(first)
                    return try await Self.echo(peer)
                }
                isHostile = true
                outcomes.noteHostile("started")
                // Until the connection ends: the kernel's buffers take tens of MiB first.
                if nonReader == .client {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<senders {
                            group.addTask {
                                while true {
                                    try await peer.send(answer)
                                    outcomes.noteSent(answer.count)
                                }
                            }
                        }
                        try await group.next()
                    }
                }
            } catch {
                if let error = error as? NetworkError { outcomes.add(error) }
                if isHostile { outcomes.noteHostile("ended: \(error)") }
                return
            }
            // Reads nothing more; waits for the connection's end.
            let error = await peer.failure()
            if let error { outcomes.add(error) }
            outcomes.noteHostile("ended: \(error.map { "\($0)" } ?? "cancelled")")
        }
        defer { server.task.cancel() }
        let budget = try #require(server.budget())

        let reader = stack.client(to: server.endpoint)
        defer { reader.cancel() }
        try await reader.send(Data("echo me".utf8))
        #expect(try await reader.receive(7) == Data("echo me".utf8))

        let hostile = stack.client(to: server.endpoint)
        defer { hostile.cancel() }
        try await hostile.send(Data("flood..".utf8))
        // The client's pace, not a wait for an event: its sends wait once nothing drains, and
        // end when the listener closes the connection.
        let sending = Task {
            while nonReader == .application { try await hostile.send(chunk) }
        }
        defer { sending.cancel() }

        // The hostile connection's handler must hold on to it; if it ends instead (a failure
        // other than the limit's), the wait ends with it and the message says how.
        _ = try await Self.waitForBudget(budget) { $0.buffered >= limit || $0.closedConnections >= 1 || outcomes.hostileEnded }
        #expect(budget.peak >= limit, "peak \(budget.peak) of \(limit); the hostile connection: \(outcomes.hostileHistory)")
        // Served while the holder holds (or as the listener closes it).
        try await reader.send(Data("echo 2.".utf8))
        #expect(try await reader.receive(7) == Data("echo 2.".utf8))

        _ = try await Self.waitForBudget(budget) { $0.closedConnections >= 1 && $0.buffered < limit }
        #expect(budget.closedConnections >= 1, "buffered \(budget.buffered), peak \(budget.peak); the hostile connection: \(outcomes.hostileHistory)")
        #expect(budget.buffered < limit, "buffered \(budget.buffered) of \(limit)")
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.serverBusy < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(outcomes.serverBusy >= 1, "the hostile connection: \(outcomes.hostileHistory)")

        try await reader.send(Data("echo 3.".utf8))
        #expect(try await reader.receive(7) == Data("echo 3.".utf8))
        #expect(try await Self.echoOnceServed(stack, at: server.endpoint, budget: budget, limit: limit) == Data("echo 4.".utf8))
        // The first client, idle now, holds nothing: an idle connection must never look like a
        // stalled holder the listener would close.
        _ = try await Self.waitForBudget(budget) { $0.buffered == 0 }
        #expect(budget.buffered == 0, "an idle connection holds \(budget.buffered) bytes; the hostile connection: \(outcomes.hostileHistory)")
        print("\(stack) listener, \(nonReader) never reads, limit \(limit >> 10) KiB: budget peak \(budget.peak) bytes, now \(budget.buffered), closed \(budget.closedConnections), refused \(budget.refusedConnections)")
    }

    // MARK: Helpers

    /// A WebSocket upgrade request, whole.
    static let upgradeRequest =
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

    /// Echoes seven-byte messages (or, on TLS, seven bytes at a time) until the peer ends.
    @Sendable static func echo(_ peer: StreamPeer) async throws {
        while true { try await peer.send(try await peer.receive(7)) }
    }

    /// Echoes `message` (seven bytes) through a new client, connecting again while a client's
    /// handshake misses the listener's deadline (`noResponse` on the client, or a reset), until
    /// a generous deadline. Returns how many attempts missed it.
    static func echoServed(_ stack: Stack, at endpoint: NWEndpoint, _ message: Data) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(90)
        var missed = 0
        while true {
            let client = stack.client(to: endpoint)
            defer { client.cancel() }
            do {
                try await client.send(message)
                #expect(try await client.receive(7) == message)
                return missed
            } catch let error as NetworkError where ContinuousClock.now < deadline {
                print("\(stack) client missed the handshake deadline: \(error)")
                missed += 1
            }
        }
    }

    /// Waits (generously) until the listener's budget shows `condition`.
    static func waitForBudget(_ budget: ListenerBufferBudget, _ condition: (ListenerBufferBudget) -> Bool) async throws -> ListenerBufferBudget {
        let deadline = ContinuousClock.now + .seconds(90)
        while !condition(budget) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        return budget
    }

    /// What a new client gets echoed once the listener serves it: connections it did not
    /// close can grow back to the limit for a moment, and a client arriving then is reset; it
    /// connects again once the listener is back under the limit, until a generous deadline.
    static func echoOnceServed(_ stack: Stack, at endpoint: NWEndpoint, budget: ListenerBufferBudget, limit: Int) async throws -> Data {
        let deadline = ContinuousClock.now + .seconds(90)
        while true {
            let client = stack.client(to: endpoint)
            defer { client.cancel() }
            do {
                try await client.send(Data("echo 4.".utf8))
                return try await client.receive(7)
            } catch let error as NetworkError where ContinuousClock.now < deadline {
                _ = try await waitForBudget(budget) { $0.buffered < limit }
                #expect(budget.refusedConnections >= 1, "reset while not refused: \(error)")
            }
        }
    }
}

/// A connection of any of the stacks over TCP, as the tests drive it: messages (WebSocket's
/// binary ones, TLV's of type 1) or, on TLS, bytes.
struct StreamPeer: Sendable {
    let send: @Sendable (Data) async throws -> Void
    /// The next message; on TLS the next `count` bytes.
    let receive: @Sendable (_ count: Int) async throws -> Data
    /// Waits for the connection's end: the error it failed with, nil if cancelled.
    let failure: @Sendable () async -> NetworkError?
    let cancel: @Sendable () -> Void

    init<P: StreamProtocol>(bytes connection: NetworkConnection<P>) {
        send = { try await connection.send($0) }
        receive = { try await connection.receive(exactly: $0).content }
        failure = { await Self.failure(of: connection) }
        cancel = { connection.cancel() }
    }

    init(webSocket connection: NetworkConnection<WebSocket>) {
        send = { try await connection.send($0) }
        receive = { _ in try await connection.receive().content }
        failure = { await Self.failure(of: connection) }
        cancel = { connection.cancel() }
    }

    init(tlv connection: NetworkConnection<TLV>) {
        send = { try await connection.send($0, type: 1) }
        receive = { _ in try await connection.receive().content }
        failure = { await Self.failure(of: connection) }
        cancel = { connection.cancel() }
    }

    private static func failure(of connection: NetworkConnection<some NetworkProtocol>) async -> NetworkError? {
        for await state in connection.states {
            if case .failed(let error) = state { return error }
        }
        return nil
    }
}

/// A listener of any stack on 127.0.0.1 with a system-chosen port, running a handler in a task.
struct AttackedListener: Sendable {
    let port: NWEndpoint.Port
    let task: Task<Void, any Error>
    /// The listener's buffer budget, once it runs.
    let budget: @Sendable () -> ListenerBufferBudget?
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: port) }

    static func start<P: NetworkProtocol>(
        _ stack: P, bufferLimit: Int?, wrap: @escaping @Sendable (NetworkConnection<P>) -> StreamPeer,
        handler: @escaping @Sendable (StreamPeer) async throws -> Void
    ) async throws -> AttackedListener {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any), using: NetworkParameters(stack: stack))
        if let bufferLimit { listener.connectionBufferLimit = bufferLimit }
        let task = Task { try await listener.run { try await handler(wrap($0)) } }
        try await listener.waitUntilReady()
        return AttackedListener(port: listener.port!, task: task, budget: { listener.bufferBudget.withLock { $0 } })
    }
}

/// A client that trickles a handshake it never finishes, a byte every 200 ms, over plain TCP
/// (TLS: a ClientHello's record; WebSocket over TCP: an upgrade request whose header block
/// never ends) or over a real TLS connection (WebSocket over TLS: the same upgrade request).
struct Trickler: Sendable {
    private let send: @Sendable (Data) async throws -> Void
    private let receive: @Sendable () async throws -> Bool
    let cancel: @Sendable () -> Void
    private let bytes: [UInt8]

    init(stack: StreamListenerAttackTests.Stack, to endpoint: NWEndpoint) {
        // An upgrade request that goes on with header lines for as long as it is let.
        let upgrade = Array(("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + String(repeating: "X-Slow: a\r\n", count: 500)).utf8)
        // A handshake record announcing 512 bytes, which never all come.
        let record: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC] + [UInt8](repeating: 0x03, count: 500)
        switch stack {
        case .webSocketOverTLS:
            let connection = NetworkConnection(to: endpoint) { testTLSClient() }
            (send, receive, cancel) = Self.driving(connection)
            bytes = upgrade
        case .webSocketOverTCP:
            let connection = NetworkConnection(to: endpoint) { TCP() }
            (send, receive, cancel) = Self.driving(connection)
            bytes = upgrade
        case .tcp, .tls, .tlvOverTLS, .tlvOverTCP:
            let connection = NetworkConnection(to: endpoint) { TCP() }
            (send, receive, cancel) = Self.driving(connection)
            bytes = record
        }
    }

    private static func driving<P: StreamProtocol>(
        _ connection: NetworkConnection<P>
    ) -> (@Sendable (Data) async throws -> Void, @Sendable () async throws -> Bool, @Sendable () -> Void) {
        (
            { try await connection.send($0) },
            { try await connection.receive(atLeast: 1, atMost: 65536).metadata.isEndOfStream },
            { connection.cancel() }
        )
    }

    /// Trickles until the listener ends the connection (end of stream or a failure): true; or
    /// until the bytes run out (100 s) or the task is cancelled: false.
    func trickleUntilClosed() async -> Bool {
        let ended = ManagedCounter()
        let receive = receive
        let watching = Task {
            while true {
                do {
                    if try await receive() { break }
                } catch {
                    break
                }
            }
            ended.increment()
        }
        defer { watching.cancel() }
        var failed = false
        for byte in bytes where ended.value == 0 && !Task.isCancelled {
            do {
                try await send(Data([byte]))
            } catch {
                failed = true
                break
            }
            // The trickle's pace, not a wait for an event.
            try? await Task.sleep(for: .milliseconds(200))
        }
        // Seen before this side cancels anything: the listener's doing.
        let closedByListener = failed || ended.value > 0
        cancel()
        return closedByListener
    }
}

/// Whether the listener ended `fd`'s connection (end of stream or a reset), without waiting;
/// what it sent (a WebSocket upgrade's answer) is read and dropped.
private func endedByPeer(_ fd: Int32) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let got = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if got > 0 { continue }
        return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)
    }
}
