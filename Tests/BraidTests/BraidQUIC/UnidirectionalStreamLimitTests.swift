import Testing
@testable import BraidQUIC

/// ngtcp2 0.12.1 keeps every unidirectional stream the peer opens until the connection ends,
/// so a peer may open only `peerUnidirectionalStreamLimit` of them over a connection's life:
/// past it no credit comes back, and once the last is consumed the connection closes with
/// NO_ERROR and a reason that says why. Over the in-memory wire, as an attacker would open them:
/// one byte and FIN each, as fast as credit comes back.
@Suite(.ownThread) struct UnidirectionalStreamLimitTests {
    static let limit: UInt64 = 12

    /// A client connected over the in-memory wire to a server that gives `initialCredit`
    /// unidirectional streams at first and `limit` over a connection's life.
    private func connect(initialCredit: UInt64 = 3, limit: UInt64 = Self.limit) throws -> (run: StreamTests.EchoRun, client: QUICConnection, server: QUICConnection) {
        let run = try StreamTests.EchoRun {
            $0.transport.initialMaxUnidirectionalStreams = initialCredit
            $0.transport.peerUnidirectionalStreamLimit = limit
        }
        let client = try run.connect(Fixtures.client())
        return (run, client, try #require(run.network.serverConnections.first))
    }

    /// Opens one-byte unidirectional streams as fast as the server grants them until the
    /// client cannot open another (no credit, or closed); returns how many it opened, and
    /// the most it was ever allowed (opened plus credit left).
    private func openUntilRefused(_ client: QUICConnection, _ run: StreamTests.EchoRun, upTo attempts: Int) throws -> (opened: Int, allowed: Int) {
        var opened = 0
        var allowed = 0
        for _ in 0..<attempts {
            run.network.run(for: .seconds(5)) { client.isClosed || client.streamsLeft(bidirectional: false) > 0 }
            let left = client.streamsLeft(bidirectional: false)
            allowed = max(allowed, opened + Int(left))
            guard left > 0 else { break }
            let id = try client.openStream(bidirectional: false)
            try client.send(streamID: id, bytes: [0x78], fin: true)
            opened += 1
        }
        return (opened, allowed)
    }

    @Test func peerGetsNoCreditPastTheLimitAndTheConnectionClosesWithItsReason() throws {
        let (run, client, server) = try connect()
        let (opened, allowed) = try openUntilRefused(client, run, upTo: 10 * Int(Self.limit))
        #expect(opened == Int(Self.limit))
        #expect(allowed == Int(Self.limit), "the peer was allowed \(allowed) unidirectional streams")

        #expect(run.network.run(for: .seconds(30)) { client.isClosed })
        let reason = QUICConnection.unidirectionalStreamLimitReason(Self.limit)
        #expect(client.closeReason == .transportError(code: 0, reason: reason, byPeer: true))
        #expect(server.closeReason == .transportError(code: 0, reason: reason, byPeer: false))
        // Every stream the peer opened was consumed before the close.
        #expect(server.peerUnidirectionalStreamsEnded == Self.limit)
    }

    /// Below the limit nothing changes: credit comes back for every stream consumed, and what
    /// ngtcp2 keeps of each is counted in the figure a listener's buffer limit reads.
    @Test func streamsBelowTheLimitReturnCreditAndCountTheirRetainedState() throws {
        let (run, client, server) = try connect()
        let idleBound = server.engineReceiveBound
        let (opened, _) = try openUntilRefused(client, run, upTo: Int(Self.limit) - 2)
        #expect(opened == Int(Self.limit) - 2)
        #expect(run.network.run(for: .seconds(30)) { server.peerUnidirectionalStreamsEnded == Self.limit - 2 })
        #expect(!client.isClosed && !server.isClosed)
        #expect(client.streamsLeft(bidirectional: false) > 0)
        // Each consumed stream stays counted at what ngtcp2 may keep of it: its object and a
        // reassembly buffer with one piece.
        let perStream = Int(ReceiveWindowLedger.pieceSize + ReceiveWindowLedger.reassemblyOverhead + ReceiveWindowLedger.retainedStreamOverhead)
        #expect(server.engineReceiveBound - idleBound >= opened * perStream, "\(server.engineReceiveBound) from \(idleBound)")
    }

    /// A limit below the peer's initial credit: the initial credit stands, and the connection
    /// closes only once all of it is consumed.
    @Test func initialCreditAboveTheLimitStands() throws {
        let (run, client, server) = try connect(limit: 1)
        let (opened, allowed) = try openUntilRefused(client, run, upTo: 10)
        #expect(opened == 3 && allowed == 3)
        #expect(run.network.run(for: .seconds(30)) { server.isClosed })
        #expect(server.closeReason == .transportError(code: 0, reason: QUICConnection.unidirectionalStreamLimitReason(3), byPeer: false))
    }
}
