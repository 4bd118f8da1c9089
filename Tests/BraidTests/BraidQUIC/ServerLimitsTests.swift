import Testing

@testable import BraidQUIC

/// The server endpoint's limits, asserted on its live counts: half-open handshakes (automatic
/// Retry and the hard cap), connections per address, the connection table (idle eviction), and
/// rounds of abandoned handshakes that must leave nothing behind.
@Suite(.ownThread) struct ServerLimitsTests {
    /// Real ClientHellos from fresh connections (Braid's own client engine) that never go
    /// further: the endpoint's half of every handshake stays open until the handshake timeout.
    /// The server's replies are dropped, as a spoofing flooder never sees them.
    final class HandshakeFlood {
        let server: QUICServerEndpoint
        let network: SimulatedNetwork
        let client: QUICClientContext
        /// The connections the endpoint created for the flood (to drive their timers).
        private(set) var accepted: [QUICConnection] = []
        private var port: UInt16 = 1000
        /// Where the server's packets are written (and dropped), as a driver writes into its
        /// socket's slots: the engine keeps no batch memory of its own then.
        private let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: QUICConnection.maxBatchBytes + 2048, alignment: 16)

        deinit { slot.deallocate() }

        private func drop(_ connection: QUICConnection) {
            connection.writeTransmits(now: network.now, into: { slot }, commit: { _, _, _, _ in })
        }

        init(server: QUICServerEndpoint, network: SimulatedNetwork) throws {
            self.server = server
            self.network = network
            client = try Fixtures.client()
        }

        /// Sends `count` first flights, each from a new address (10.0.x.y) unless `ip` is given.
        func send(_ count: Int, ip: String? = nil) throws {
            for _ in 0..<count {
                port &+= 1
                let from = QUICAddress(ip: ip ?? "10.0.\(port >> 8).\(port & 0xff)", port: port)!
                let connection = try client.connect(
                    path: QUICPath(local: from, remote: network.serverAddress), serverName: "localhost", now: network.now)
                for transmit in connection.pollTransmits(now: network.now) {
                    for datagram in transmit.datagrams {
                        let path = QUICPath(local: network.serverAddress, remote: from)
                        guard let accepted = server.receive(datagram: Array(datagram), path: path, now: network.now),
                            accepted.isNewlyAccepted
                        else { continue }
                        self.accepted.append(accepted)
                        drop(accepted)
                        server.applyRoutingChanges(of: accepted)
                    }
                }
                _ = server.pollEndpointTransmits()
            }
        }

        /// Moves the clock by `duration`, firing the flood connections' timers (their PTO
        /// retransmissions go nowhere) until the handshake timeout ends them.
        func wait(_ duration: Duration) {
            let end = network.now + duration
            while true {
                accepted.removeAll { $0.isTerminated }
                guard let next = accepted.compactMap(\.nextDeadline).min(), next <= end else { break }
                network.advance(by: max(next - network.now, .zero))
                for connection in accepted {
                    guard let deadline = connection.nextDeadline, deadline <= network.now else { continue }
                    connection.handleTimeout(now: network.now)
                    drop(connection)
                    server.applyRoutingChanges(of: connection)
                }
            }
            network.advance(by: max(end - network.now, .zero))
        }
    }

    private static func server(_ configure: (inout QUICServerConfiguration) -> Void) throws -> QUICServerEndpoint {
        try Fixtures.server {
            $0.transport.handshakeTimeout = .seconds(3)
            configure(&$0)
        }
    }

    /// The flood fills the half-open table up to the Retry threshold, then gets Retry packets
    /// (no state); a legitimate client still connects, paying the Retry round trip; once the
    /// flood's handshakes time out, Retry turns off and the next client connects directly.
    @Test func floodOfHalfOpenHandshakesTurnsRetryOnUntilItEnds() throws {
        let server = try Self.server {
            $0.retryThreshold = 20
            $0.maxHalfOpenConnections = 40
        }
        let network = SimulatedNetwork(server: server)
        let flood = try HandshakeFlood(server: server, network: network)
        try flood.send(200)
        #expect(server.halfOpenCount == 20)
        #expect(server.isRetryActive)
        #expect(server.retriesSent == 180)
        #expect(server.statistics.halfOpenConnections == 20 && server.statistics.connections == 20)

        let legitimate = try network.connect(Fixtures.client())
        #expect(network.run { legitimate.isEstablished && legitimate.handshakeConfirmed })
        #expect(server.retriesSent == 181, "the legitimate client pays one Retry round trip")
        #expect(server.halfOpenCount == 20)

        flood.wait(.seconds(10))
        #expect(server.halfOpenCount == 0)
        #expect(server.connectionCount == 1)
        #expect(!server.isRetryActive)
        let later = try network.connect(Fixtures.client())
        #expect(network.run { later.isEstablished })
        #expect(server.retriesSent == 181, "after the flood no Retry is needed")
    }

    /// Clients that pass Retry and then stall are capped too: past `maxHalfOpenConnections`
    /// a client is refused with CONNECTION_REFUSED and a reason that says the server is busy.
    @Test func halfOpenHandshakesHaveAHardCap() throws {
        let server = try Self.server {
            $0.retry = .never
            $0.maxHalfOpenConnections = 30
        }
        let network = SimulatedNetwork(server: server)
        let flood = try HandshakeFlood(server: server, network: network)
        try flood.send(50)
        #expect(server.halfOpenCount == 30)
        #expect(server.refusedConnections == 20)
        let refused = try network.connect(Fixtures.client())
        #expect(network.run { refused.isClosed })
        #expect(refused.closeReason == .transportError(code: 0x2, reason: "server busy: too many handshakes in progress", byPeer: true))
        flood.wait(.seconds(10))
        #expect(server.halfOpenCount == 0 && server.connectionCount == 0)
    }

    /// A connection the server already took and then refuses (a listener cancelled between the
    /// endpoint taking a client and `run` receiving it: `QUICConnection.refuse`) closes the
    /// client mid-handshake with CONNECTION_REFUSED and the shutdown reason, as the endpoint's
    /// own refusals do, and leaves nothing in the server's tables.
    @Test func aTakenClientRefusedMidHandshakeSeesConnectionRefused() throws {
        let server = try Self.server { _ in }
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(Fixtures.client())
        #expect(network.run { !network.serverConnections.isEmpty })
        let taken = network.serverConnections[0]
        #expect(!taken.isEstablished && !client.isEstablished, "the refusal comes during the handshake")
        taken.refuse(reason: QUICServerEndpoint.shuttingDownReason, now: network.now)
        #expect(network.run { client.isClosed })
        #expect(!client.isEstablished)
        #expect(client.closeReason == .transportError(code: 0x2, reason: QUICServerEndpoint.shuttingDownReason, byPeer: true))
        #expect(taken.closeReason == .transportError(code: 0x2, reason: QUICServerEndpoint.shuttingDownReason, byPeer: false))
        network.settle(quiet: .seconds(5))
        #expect(server.connectionCount == 0 && server.halfOpenCount == 0)
    }

    /// One address at its limit is refused; another address is still served.
    @Test func oneAddressCannotTakeTheWholeTable() throws {
        let server = try Self.server { $0.maxConnectionsPerAddress = 3 }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let first = try (0..<3).map { _ in try network.connect(context, fromIP: "127.0.0.2") }
        #expect(network.run { first.allSatisfy(\.isEstablished) })
        let fourth = try network.connect(context, fromIP: "127.0.0.2")
        #expect(network.run { fourth.isClosed })
        #expect(fourth.closeReason == .transportError(code: 0x2, reason: "server busy: too many connections from this address", byPeer: true))
        let other = try network.connect(context, fromIP: "127.0.0.3")
        #expect(network.run { other.isEstablished })
        #expect(server.connectionCount == 4)
        #expect(server.refusedConnections == 1)
    }

    /// Spoofed Initials carrying someone's address do not count against that address (only
    /// proven addresses do), so they cannot lock it out.
    @Test func spoofedHandshakesDoNotUseUpAnAddressLimit() throws {
        let server = try Self.server { $0.maxConnectionsPerAddress = 2 }
        let network = SimulatedNetwork(server: server)
        let flood = try HandshakeFlood(server: server, network: network)
        try flood.send(10, ip: "127.0.0.2")
        #expect(server.halfOpenCount == 10)
        let client = try network.connect(Fixtures.client(), fromIP: "127.0.0.2")
        #expect(network.run { client.isEstablished })
    }

    /// At the connection limit a new client takes the place of the connection idle longest
    /// (after proving its address with Retry); a connection with an open stream is not idle.
    @Test func fullTableEvictsTheLongestIdleConnection() throws {
        let server = try Self.server { $0.maxConnections = 3 }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        var clients: [QUICConnection] = []
        for _ in 0..<3 {
            let client = try network.connect(context)
            #expect(network.run { client.isEstablished && client.handshakeConfirmed })
            network.settle()
            clients.append(client)
        }
        // The first is idle longest; the last keeps a stream open, so it is not idle at all.
        let stream = try clients[2].openStream(bidirectional: true)
        try clients[2].send(streamID: stream, bytes: [1, 2, 3])
        network.settle()
        #expect(server.statistics.streams == 1)
        #expect(server.isRetryActive, "a full table asks for address validation before evicting anyone")
        let retries = server.retriesSent

        let newcomer = try network.connect(context)
        #expect(network.run { newcomer.isEstablished && clients[0].isClosed })
        #expect(server.retriesSent == retries + 1)
        #expect(server.evictedConnections == 1)
        #expect(clients[0].closeReason == .transportError(code: 0, reason: "server busy: idle connection closed to make room", byPeer: true))
        #expect(!clients[1].isClosed && !clients[2].isClosed)
        network.settle()
        #expect(server.connectionCount == 3)
    }

    /// With every connection busy (a stream open), a new client is refused as busy.
    @Test func fullTableWithNothingIdleRefusesAsBusy() throws {
        let server = try Self.server { $0.maxConnections = 1 }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let holder = try network.connect(context)
        #expect(network.run { holder.isEstablished })
        let stream = try holder.openStream(bidirectional: true)
        try holder.send(streamID: stream, bytes: [1])
        network.settle()
        let refused = try network.connect(context)
        #expect(network.run { refused.isClosed })
        #expect(refused.closeReason == .transportError(code: 0x2, reason: "server busy: connection limit reached", byPeer: true))
        #expect(!holder.isClosed)
        #expect(server.refusedConnections == 1 && server.evictedConnections == 0)
    }

    /// Rounds of abandoned handshakes leave nothing behind: after each round's handshake
    /// timeout every count is back to zero and the tables are no larger than after the first.
    @Test func abandonedHandshakesInRoundsLeaveNothingBehind() throws {
        let server = try Self.server {
            $0.retry = .never
            $0.maxHalfOpenConnections = 2_000
        }
        let network = SimulatedNetwork(server: server)
        let flood = try HandshakeFlood(server: server, network: network)
        var capacities: [Int] = []
        for _ in 0..<3 {
            try flood.send(300)
            #expect(server.halfOpenCount == 300)
            flood.wait(.seconds(10))
            #expect(server.connectionCount == 0)
            #expect(server.halfOpenCount == 0)
            #expect(server.routeCount == 0)
            #expect(flood.accepted.isEmpty)
            capacities.append(server.tableCapacity)
        }
        #expect(capacities[2] <= capacities[0], "the routing tables grew round after round: \(capacities)")
        // A client is served as before.
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
    }

    /// Addresses are counted by IP without the port; IPv6 by its /64, except IPv4-mapped ones.
    @Test func addressesAreCountedByIPAndIPv6Prefix() {
        func key(_ ip: String, _ port: UInt16) -> QUICAddress { QUICServerEndpoint.clientKey(QUICAddress(ip: ip, port: port)!) }
        #expect(key("192.0.2.1", 1000) == key("192.0.2.1", 2000))
        #expect(key("192.0.2.1", 1000) != key("192.0.2.2", 1000))
        #expect(key("2001:db8:1:2::1", 1000) == key("2001:db8:1:2:ffff::9", 2000))
        #expect(key("2001:db8:1:2::1", 1000) != key("2001:db8:1:3::1", 1000))
        #expect(key("::ffff:192.0.2.1", 1000) == key("::ffff:192.0.2.1", 2000))
        #expect(key("::ffff:192.0.2.1", 1000) != key("::ffff:192.0.2.2", 1000))
    }
}
