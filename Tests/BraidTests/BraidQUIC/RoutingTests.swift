import CBraid
import Testing
@testable import BraidQUIC

/// The endpoint's routing table follows its connections (IDs issued, retired, the end) through
/// the routing changes the owner hands on, with no pointer from connection to endpoint.
@Suite struct RoutingTests {
    /// A short-header datagram for connection ID `id`; its payload is noise, it only gets routed.
    func shortHeaderDatagram(to id: ConnectionID) -> [UInt8] {
        [0x40] + id.bytes + pattern(seed: 3, count: 40)
    }

    /// The server connection ID the client is sending to now.
    func destination(of client: QUICConnection) -> ConnectionID {
        ConnectionID(ngtcp2_conn_get_dcid(client.conn).pointee)
    }

    @Test func idleTimeoutReleasesTheConnectionAndItsRoutes() throws {
        let server = try Fixtures.server { $0.transport.idleTimeout = .seconds(2) }
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(Fixtures.client { $0.transport.idleTimeout = .seconds(2) })
        #expect(network.run { client.handshakeConfirmed })
        let serverSide = try #require(network.serverConnections.first)
        #expect(server.connectionCount == 1)
        // The endpoint routes the client's original DCID and the server's first SCID itself;
        // anything beyond came from connection IDs the connection issued.
        #expect(server.routeCount > 2)
        let path = QUICPath(local: network.serverAddress, remote: client.path.local)
        let routed = server.receive(datagram: shortHeaderDatagram(to: destination(of: client)), path: path, now: network.now)
        #expect(routed === serverSide)

        // Idle: the server connection ends on its own timer, outside `receive`.
        #expect(network.run(for: .seconds(30)) { serverSide.isTerminated })
        #expect(serverSide.closeReason == .idleTimeout)
        #expect(server.connectionCount == 0)
        #expect(server.routeCount == 0)
        #expect(serverSide.routingChanges.isEmpty)
        // Its IDs now belong to no one: the endpoint answers with a stateless reset.
        let resetsBefore = server.statelessResetsSent
        #expect(server.receive(datagram: shortHeaderDatagram(to: destination(of: client)), path: path, now: network.now) == nil)
        #expect(server.statelessResetsSent == resetsBefore + 1)
    }

    @Test func handshakeTimeoutReleasesTheConnection() throws {
        let server = try Fixtures.server { $0.transport.handshakeTimeout = .seconds(3) }
        let network = SimulatedNetwork(server: server)
        _ = try network.connect(Fixtures.client())
        #expect(network.run { !network.serverConnections.isEmpty })
        let serverSide = try #require(network.serverConnections.first)
        #expect(server.connectionCount == 1)
        // The client vanishes after its first flight: the handshake can never finish.
        network.conditions.blackhole = true
        #expect(network.run(for: .seconds(30)) { serverSide.isTerminated })
        #expect(serverSide.closeReason == .handshakeTimeout)
        #expect(server.connectionCount == 0)
        #expect(server.routeCount == 0)
    }

    @Test func clientConnectionsRecordNoRoutingChanges() throws {
        let network = SimulatedNetwork(server: try Fixtures.server())
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.handshakeConfirmed })
        client.close(now: network.now)
        #expect(network.run { client.isTerminated })
        #expect(client.routingChanges.isEmpty)
    }

    @Test func changesWaitForTheOwnerAndAStrangerIgnoresThem() throws {
        let server = try Fixtures.server()
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.handshakeConfirmed })
        let serverSide = try #require(network.serverConnections.first)
        // Driven by hand, outside the network: close, then let the closing period run out.
        serverSide.close(now: network.now)
        serverSide.handleTimeout(now: network.now + .seconds(60))
        #expect(serverSide.isTerminated)
        #expect(serverSide.routingChanges == [.terminated])
        #expect(server.connectionCount == 1, "nothing reaches the endpoint until the owner hands it on")
        let stranger = try Fixtures.server()
        stranger.applyRoutingChanges(of: serverSide)
        #expect(stranger.connectionCount == 0 && stranger.routeCount == 0)
        #expect(serverSide.routingChanges == [.terminated])
        server.applyRoutingChanges(of: serverSide)
        #expect(server.connectionCount == 0)
        #expect(server.routeCount == 0)
        #expect(serverSide.routingChanges.isEmpty)
    }
}
