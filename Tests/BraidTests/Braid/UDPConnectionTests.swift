import BraidIO
import Foundation
import Glibc
import Testing

@testable import Braid
import BraidCore

/// A Braid UDP listener that echoes every datagram back to its sender.
struct RunningUDPEcho {
    let listener: NetworkListener<UDP>
    let task: Task<Void, any Error>
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: listener.port!) }

    static func start(
        _ stack: UDP = UDP(), limit: Int? = nil,
        handler: @escaping @Sendable (NetworkConnection<UDP>) async throws -> Void = { connection in
            for try await (content, _) in connection.messages { try await connection.send(content) }
        }
    ) async throws -> RunningUDPEcho {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any), using: NetworkParameters(stack: stack))
        if let limit { listener.newConnectionLimit = limit }
        let task = Task { try await listener.run(handler) }
        try await listener.waitUntilReady()
        return RunningUDPEcho(listener: listener, task: task)
    }
}

/// Sends `message` until a reply comes back, as a UDP client does: again after `interval`,
/// then after twice as long each time up to a second, in case UDP dropped it or its echo,
/// until `deadline` has passed, while one receive waits throughout (a reply that comes after
/// the next send went out is still taken). Nil if none came by then.
///
/// Backing off rather than a fixed 5 s: in full-suite runs under load the cooperative pool
/// took 1 to 4 s to start a ready task during the suite's first seconds (measured), and an
/// echo needs several such hops. A deadline rather than a number of sends: on a loaded
/// machine 25 sends (about 23 s) were not always enough.
func udpEcho(
    _ message: Data, on connection: NetworkConnection<UDP>, within deadline: Duration = .seconds(120), interval: Duration = .milliseconds(200)
) async throws -> (content: Data, metadata: UDP.Metadata)? {
    try await firstReply(on: connection) {
        let end = ContinuousClock.now + deadline
        var wait = interval
        while ContinuousClock.now < end {
            try await connection.send(message)
            try await Task.sleep(for: wait)
            wait = min(wait * 2, max(interval, .seconds(1)))
        }
    }
}

/// The next datagram, or nil if none arrives within `interval`.
func receiveWithin(
    _ interval: Duration, on connection: NetworkConnection<UDP>
) async throws -> (content: Data, metadata: UDP.Metadata)? {
    try await firstReply(on: connection) { try await Task.sleep(for: interval) }
}

/// The next datagram received while `timer` runs, or nil once it returns. A datagram the
/// receive took as the timer ran out is returned, not dropped with the cancelled receive.
private func firstReply(
    on connection: NetworkConnection<UDP>, while timer: @escaping @Sendable () async throws -> Void
) async throws -> (content: Data, metadata: UDP.Metadata)? {
    try await withThrowingTaskGroup(of: (content: Data, metadata: UDP.Metadata)?.self) { group in
        group.addTask { try await connection.receive() }
        group.addTask {
            try await timer()
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        if let first { return first }
        while let result = await group.nextResult() {
            if case .success(let reply?) = result { return reply }
        }
        return nil
    }
}

/// Sends `message` every `interval` of virtual time, `attempts` times at most, until a reply
/// comes, one receive waiting throughout; nil if none came within `interval` of the last send.
/// For tests in a `MemoryWorld`, which loses no datagram: one send is enough unless the test
/// waits for the server to change its mind.
func udpEcho(
    _ message: Data, on connection: NetworkConnection<UDP>, in world: MemoryWorld, attempts: Int = 1, interval: Duration = .seconds(60)
) async throws -> (content: Data, metadata: UDP.Metadata)? {
    try await firstReply(on: connection) {
        for _ in 0..<attempts {
            try await connection.send(message)
            try await world.sleep(for: interval)
        }
    }
}

/// `NetworkConnection { UDP() }` against `NetworkListener { UDP() }` in memory (`MemoryWorld`):
/// datagrams with their metadata, a listener's peers, its idle timeout and peer limit, the
/// waiting state, options refused. What the kernel's sockets do is in `UDPLoopbackTests`.
@Suite struct UDPConnectionTests {
    @Test(.timeLimit(.minutes(10))) func echoesADatagramWithItsMetadata() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningUDPEcho.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { UDP { IP().version(.v4) } }
            defer { connection.cancel() }
            let (data, metadata) = try #require(await udpEcho(Data("player_position:100,50".utf8), on: connection, in: world))
            #expect(data == Data("player_position:100,50".utf8))
            #expect(metadata.remoteEndpoint == server.endpoint)
            #expect(metadata.ecn == .notECT)
            #expect(connection.state == .ready)
            #expect(connection.remoteEndpoint == server.endpoint)
        }
    }

    @Test(.timeLimit(.minutes(10))) func aListenerServesOneHundredPeers() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningUDPEcho.start()
            defer { server.task.cancel() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for peer in 0..<100 {
                    group.addTask {
                        let connection = NetworkConnection(to: server.endpoint) { UDP() }
                        defer { connection.cancel() }
                        let message = Data("peer \(peer)".utf8)
                        let reply = try await udpEcho(message, on: connection, in: world)
                        #expect(reply?.content == message)
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    /// A peer whose connection on the listener ended gets a new connection with its next
    /// datagram: the listener's memo of the peer it last read from does not outlive the
    /// connection, and no datagram goes to the ended one.
    @Test(.timeLimit(.minutes(10))) func aPeerWhoseConnectionEndedGetsANewOne() async throws {
        try await MemoryWorld.run { world in
            let accepted = Locked(0)
            // Each connection echoes its first datagram, then ends.
            let server = try await RunningUDPEcho.start { connection in
                accepted.withLock { $0 += 1 }
                for try await (content, _) in connection.messages {
                    try await connection.send(content)
                    break
                }
                connection.cancel()
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { UDP() }
            defer { connection.cancel() }
            let one = Data("one".utf8), two = Data("two".utf8)
            #expect(try await udpEcho(one, on: connection, in: world)?.content == one)
            // Echoes of repeated "one"s may still come: wait for the reply to "two".
            var echoed = false
            for _ in 0..<20 where !echoed {
                echoed = try await udpEcho(two, on: connection, in: world)?.content == two
            }
            #expect(echoed)
            #expect(accepted.withLock { $0 } >= 2)
        }
    }

    @Test(.timeLimit(.minutes(10))) func anIdleInboundConnectionCloses() async throws {
        try await MemoryWorld.run { world in
            let ended = Locked<NetworkConnection<UDP>.State?>(nil)
            let server = try await RunningUDPEcho.start(UDP().inboundIdleTimeout(.milliseconds(200))) { connection in
                for await state in connection.states where state != .ready && state != .preparing {
                    ended.withLock { $0 = state }
                }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { UDP() }
            defer { connection.cancel() }
            try await connection.send(Data("hello".utf8))
            _ = try await world.eventually { ended.withLock { $0 } != nil }
            #expect(ended.withLock { $0 } == .failed(.idleTimeout))
        }
    }

    /// With no route, a UDP connection waits and retries like every stack, then becomes ready.
    @Test(.timeLimit(.minutes(10))) func noRouteWaitsThenConnects() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningUDPEcho.start()
            defer { server.task.cancel() }
            // The port is this world's own: no other test's connection goes there.
            let port = server.listener.port!.rawValue
            ClientEstablishment.routeFailuresForTesting.withLock { $0[port] = (ENETUNREACH, 1) }
            defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port) } }
            let connection = NetworkConnection(to: server.endpoint) { UDP() }
            let states = connection.states
            let observed = Task {
                var seen: [NetworkConnectionState] = []
                for await state in states { seen.append(state) }
                return seen
            }
            #expect(try await udpEcho(Data("ping".utf8), on: connection, in: world)?.content == Data("ping".utf8))
            connection.cancel()
            let unreachable = NetworkConnectionState.waiting(.system(call: "connect(\(server.endpoint))", errno: ENETUNREACH))
            #expect(await observed.value == [.setup, .preparing, unreachable, .preparing, .ready, .cancelled])
        }
    }

    /// `newConnectionLimit` bounds the peers: a second peer is not served until the first
    /// one's connection idles out and frees its place.
    @Test(.timeLimit(.minutes(10))) func theListenerBoundsItsPeersAndIdleOnesFreeTheirPlace() async throws {
        try await MemoryWorld.run { world in
            // The first peer keeps its place by sending every 100 ms of virtual time, far within
            // its idle timeout even when its task waits for a thread.
            let server = try await RunningUDPEcho.start(UDP().inboundIdleTimeout(.seconds(10)), limit: 1)
            defer { server.task.cancel() }
            let first = NetworkConnection(to: server.endpoint) { UDP() }
            defer { first.cancel() }
            #expect(try await udpEcho(Data("first".utf8), on: first, in: world)?.content == Data("first".utf8))
            // The first peer stays active (well within its idle timeout) until told to stop.
            let keepAlive = Task {
                while !Task.isCancelled {
                    try await first.send(Data("still here".utf8))
                    try await world.sleep(for: .milliseconds(100))
                }
            }

            let second = NetworkConnection(to: server.endpoint) { UDP() }
            defer { second.cancel() }
            // Refused while the first peer holds the place (three tries a second apart).
            #expect(try await udpEcho(Data("second".utf8), on: second, in: world, attempts: 3, interval: .seconds(1)) == nil)
            // The first peer goes quiet and its connection idles out; the second is served on a later try.
            keepAlive.cancel()
            #expect(try await udpEcho(Data("second".utf8), on: second, in: world, attempts: 30, interval: .seconds(1))?.content == Data("second".utf8))
        }
    }

    /// Only the peer's datagrams reach a client connection: another sender's, to the same
    /// port, are dropped by the connection itself (in memory there is no connected socket to
    /// filter them; `UDPLoopbackTests` has the kernel's side).
    @Test(.timeLimit(.minutes(10))) func aClientIgnoresDatagramsFromOtherSenders() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningUDPEcho.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { UDP() }
            defer { connection.cancel() }
            _ = try #require(await udpEcho(Data("hello".utf8), on: connection, in: world))
            guard case .hostPort(_, let port) = try #require(connection.localEndpoint) else { throw NetworkError.internalError("no port") }
            let target = SocketAddress(ip: "127.0.0.1", port: port.rawValue)!
            let stranger = SocketAddress(ip: "127.0.0.1", port: world.port().rawValue)!
            let network = world.network
            try await world.loop.submit { context in
                for _ in 0..<5 { network.send(Array("intruder".utf8), from: stranger, to: target, ecn: .notECT, context: context) }
            }
            // The intruders were sent first and the network keeps the order: they have all
            // arrived before the echo of "peer", and none was delivered.
            let reply = try #require(await udpEcho(Data("peer".utf8), on: connection, in: world))
            #expect(reply.content == Data("peer".utf8))
            #expect(reply.metadata.remoteEndpoint == server.endpoint)
            #expect(try await udpEcho(Data("last".utf8), on: connection, in: world)?.content == Data("last".utf8))
        }
    }

    /// IP options a UDP stack does not apply yet are refused, not dropped.
    @Test(.timeLimit(.minutes(10))) func unappliedIPOptionsAreUnsupported() async throws {
        try await MemoryWorld.run { world in
            for stack in [UDP { IP().fragmentationEnabled(false) }, UDP { IP().hopLimit(9) }] {
                let connection = NetworkConnection(to: world.nobody()) { stack }
                await #expect(throws: NetworkError.self) { try await connection.send(Data([1])) }
                guard case .failed(.unsupported) = connection.state else {
                    Issue.record("state \(connection.state)")
                    continue
                }
            }
        }
    }
}

/// `NetworkConnection { UDP() }` against `NetworkListener { UDP() }` over loopback, where the
/// subject is the kernel's sockets: the largest datagram through them, thousands through their
/// buffers and batches, SO_REUSEPORT across server loops, system-call counts, and a connected
/// socket's filtering.
@Suite struct UDPLoopbackTests {
    /// The largest datagram UDP allows goes through the sockets whole, one byte more is a typed
    /// error.
    @Test(.timeLimit(.minutes(10))) func aDatagramLargerThanUDPAllowsIsATypedError() async throws {
        let server = try await RunningUDPEcho.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { UDP() }
        defer { connection.cancel() }
        await #expect(throws: NetworkError.datagramTooLarge(size: 65_508, maximum: 65_507)) {
            try await connection.send(Data(count: 65_508))
        }
        // The largest one goes through whole (loopback's MTU is 64 KiB).
        let largest = Data((0..<65_507).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        #expect(try await udpEcho(largest, on: connection)?.content == largest)
        await #expect(throws: NetworkError.unsupported("empty UDP datagrams")) { try await connection.send(Data()) }
    }

    /// 10,000 numbered datagrams out and back, every one intact. UDP may drop some under load
    /// (a socket buffer or the listener's inbox overflowing while its reader waits for a
    /// thread), so those not yet back are sent again, as a UDP client would, in rounds.
    @Test(.timeLimit(.minutes(10))) func tenThousandDatagramsEchoUncorrupted() async throws {
        let server = try await RunningUDPEcho.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { UDP() }
        defer { connection.cancel() }
        let total = 10_000
        @Sendable func datagram(_ index: Int) -> Data {
            var bytes = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
            bytes += (0..<(100 + index % 900)).map { UInt8(truncatingIfNeeded: index &+ $0 &* 31) }
            return Data(bytes)
        }
        // What came back: the indices seen, and anything that is not a datagram we sent.
        let back = Locked<(seen: Set<Int>, corrupted: Int)>(([], 0))
        let receiver = Task {
            for try await (content, _) in connection.messages {
                let index = content.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                let done = back.withLock { back in
                    if index >= total || content != datagram(index) { back.corrupted += 1 } else { back.seen.insert(index) }
                    return back.seen.count == total
                }
                if done { break }
            }
        }
        defer { receiver.cancel() }
        var rounds = 0
        var sent = 0
        // Rounds go on while datagrams are missing, until a deadline generous for a loaded
        // machine (within the test's time limit), not for a number of rounds: under load a
        // round can end early, its echoes still on their way.
        let deadline = ContinuousClock.now + .seconds(400)
        while ContinuousClock.now < deadline {
            let missing = back.withLock { back in (0..<total).filter { !back.seen.contains($0) } }
            if missing.isEmpty { break }
            rounds += 1
            for start in stride(from: 0, to: missing.count, by: 50) {
                try await connection.batch {
                    for index in missing[start..<min(start + 50, missing.count)] { try await connection.send(datagram(index)) }
                }
                // Paced (about 55 KB per millisecond, under the sockets' buffers).
                if start % 100 == 0 { try await Task.sleep(for: .milliseconds(1)) }
            }
            sent += missing.count
            // The round is over once the echoes stop coming (or all are back).
            var count = back.withLock { $0.seen.count }
            repeat {
                let before = count
                try await Task.sleep(for: .milliseconds(300))
                count = back.withLock { $0.seen.count }
                if count == before { break }
            } while count < total
        }
        let (seen, corrupted) = back.withLock { ($0.seen.count, $0.corrupted) }
        print("UDP echo: \(seen) of \(total) datagrams back after \(rounds) rounds (\(sent) sent), \(corrupted) corrupted")
        #expect(corrupted == 0)
        #expect(seen == total)
    }

    /// Two server loops, each with its own socket on the port (SO_REUSEPORT): the kernel spreads
    /// the peers over them.
    @Test(.timeLimit(.minutes(10))) func aListenerOnTwoLoopsServesOneHundredPeers() async throws {
        let server = try await RunningUDPEcho.start(UDP().serverLoops(2))
        defer { server.task.cancel() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for peer in 0..<100 {
                group.addTask {
                    let connection = NetworkConnection(to: server.endpoint) { UDP() }
                    defer { connection.cancel() }
                    let message = Data("peer \(peer)".utf8)
                    let reply = try await udpEcho(message, on: connection)
                    #expect(reply?.content == message)
                }
            }
            try await group.waitForAll()
        }
    }

    @Test(.timeLimit(.minutes(10))) func aBatchOfSixtyFourSendsMakesAtMostTwoSendCalls() async throws {
        let server = try await RunningUDPEcho.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { UDP() }
        defer { connection.cancel() }
        _ = try #require(await udpEcho(Data("ready".utf8), on: connection))
        let before = try #require(await connection.socketStatistics)
        try await connection.batch {
            for index in 0..<64 { try await connection.send(Data(repeating: UInt8(index), count: 200)) }
        }
        var echoed = 0
        let reader = Task {
            for try await _ in connection.messages {
                echoed += 1
                if echoed == 64 { break }
            }
            return echoed
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(5))
            reader.cancel()
        }
        _ = try? await reader.value
        timeout.cancel()
        let after = try #require(await connection.socketStatistics)
        let sendCalls = (after.sendmsgCalls + after.sendmmsgCalls) - (before.sendmsgCalls + before.sendmmsgCalls)
        #expect(after.datagramsSent - before.datagramsSent == 64)
        #expect(sendCalls >= 1 && sendCalls <= 2)
    }

    /// Only the peer's datagrams reach a client connection: another sender's, to the same
    /// port, are not delivered (the client's socket is connected to its peer).
    @Test(.timeLimit(.minutes(10))) func aClientIgnoresDatagramsFromOtherSenders() async throws {
        let server = try await RunningUDPEcho.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { UDP() }
        defer { connection.cancel() }
        _ = try #require(await udpEcho(Data("hello".utf8), on: connection))
        guard case .hostPort(_, let port) = try #require(connection.localEndpoint) else { throw NetworkError.internalError("no port") }
        let stranger = try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        let target = SocketAddress(ip: "127.0.0.1", port: port.rawValue)!
        for _ in 0..<5 {
            Data("intruder".utf8).withUnsafeBytes { bytes in
                stranger.enqueue(DatagramMetadata(remote: target, local: stranger.localAddress), segmentSize: bytes.count, bytes: bytes)
            }
            stranger.flush()
        }
        #expect(stranger.counters.datagramsSent == 5)
        // Everything the connection receives until the echo of "peer" (and for a moment after)
        // comes from the server: a late duplicate echo of "hello" (udpEcho may have sent it
        // twice) can come too, an intruder's datagram never.
        var received: [(content: Data, metadata: UDP.Metadata)] = []
        var wait = Duration.milliseconds(200)
        // Sent again while lost (UDP), until a generous deadline.
        let deadline = ContinuousClock.now + .seconds(60)
        while !received.contains(where: { $0.content == Data("peer".utf8) }) && ContinuousClock.now < deadline {
            try await connection.send(Data("peer".utf8))
            while let reply = try await receiveWithin(wait, on: connection) {
                received.append(reply)
                if reply.content == Data("peer".utf8) { break }
            }
            wait = min(wait * 2, .seconds(1))
        }
        while let late = try await receiveWithin(.milliseconds(50), on: connection) { received.append(late) }
        #expect(received.contains { $0.content == Data("peer".utf8) })
        #expect(received.allSatisfy { $0.content != Data("intruder".utf8) && $0.metadata.remoteEndpoint == server.endpoint })
    }
}
