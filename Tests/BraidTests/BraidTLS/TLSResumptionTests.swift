import Testing
import BraidTLS

/// Session tickets, resumption and TLS 1.3 0-RTT data, accepted and rejected.
@Suite struct TLSResumptionTests {
    /// A full handshake that yields a ticket from `server`.
    func ticket(from server: TLSServerContext, client: TLSClientContext) throws -> TLSSessionTicket {
        let pair = try TLSPair(client: client, server: server)
        pair.run()
        #expect(pair.client.connection.isResumed == false)
        return try #require(pair.client.sessionTickets.last)
    }

    @Test func ticketResumesTheSession() throws {
        let server = try TLSFixtures.server()
        let client = try TLSFixtures.client()
        let ticket = try ticket(from: server, client: client)
        #expect(ticket.serverName == "localhost")
        #expect(ticket.alpn == "echo")
        #expect(ticket.maxEarlyDataSize == 0)
        let pair = try TLSPair(client: client, server: server, resumption: ticket)
        pair.run()
        #expect(pair.client.connection.isResumed)
        #expect(pair.server.connection.isResumed)
    }

    @Test func tls12TicketResumesTheSession() throws {
        let server = try TLSFixtures.server()
        let client = try TLSFixtures.client { $0.maximumVersion = .v1_2 }
        let ticket = try ticket(from: server, client: client)
        let pair = try TLSPair(client: client, server: server, resumption: ticket)
        pair.run()
        #expect(pair.client.connection.negotiatedVersion == .v1_2)
        #expect(pair.client.connection.isResumed)
    }

    @Test func ticketSurvivesSerialization() throws {
        let server = try TLSFixtures.server { $0.earlyDataEnabled = true }
        let client = try TLSFixtures.client()
        let original = try ticket(from: server, client: client)
        let restored = try #require(TLSSessionTicket(serialized: original.serialized()))
        #expect(restored == original)
        #expect(TLSSessionTicket(serialized: Array(original.serialized().dropLast())) == nil)
        let pair = try TLSPair(client: client, server: server, resumption: restored)
        pair.run()
        #expect(pair.client.connection.isResumed)
    }

    @Test func ticketForAnotherNameIsIgnored() throws {
        let server = try TLSFixtures.server()
        let client = try TLSFixtures.client()
        var ticket = try ticket(from: server, client: client)
        ticket.serverName = "other.example"
        let pair = try TLSPair(client: client, server: server, resumption: ticket)
        pair.run()
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.client.connection.isResumed == false)
    }

    @Test func sessionTicketsCanBeTurnedOff() throws {
        let pair = try TLSPair(client: TLSFixtures.client { $0.sessionTicketsEnabled = false }, server: TLSFixtures.server())
        pair.run()
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.client.sessionTickets.isEmpty)
    }

    @Test func earlyDataIsAcceptedAndDeliveredFirstInOrder() throws {
        let server = try TLSFixtures.server { $0.earlyDataEnabled = true; $0.maxEarlyDataSize = 4096 }
        let client = try TLSFixtures.client()
        let ticket = try ticket(from: server, client: client)
        #expect(ticket.maxEarlyDataSize == 4096)

        let pair = try TLSPair(client: client, server: server, resumption: ticket)
        let early = pattern(seed: 1, count: 3000)
        let first = try early.withUnsafeBytes { try pair.client.connection.sendEarlyData(UnsafeRawBufferPointer(rebasing: $0[0..<1000])) }
        let second = try early.withUnsafeBytes { try pair.client.connection.sendEarlyData(UnsafeRawBufferPointer(rebasing: $0[1000...])) }
        #expect(first == 1000 && second == 2000, "\(first) \(second)")
        // Beyond the ticket's limit nothing more fits.
        let overflow = try [UInt8](repeating: 9, count: 2000).withUnsafeBytes { try pair.client.connection.sendEarlyData($0) }
        #expect(overflow == 1096)
        let late = Array("after the handshake".utf8)
        pair.client.outgoing = late
        pair.run()
        #expect(pair.client.connection.earlyDataAccepted)
        #expect(pair.server.connection.earlyDataAccepted)
        #expect(pair.client.connection.isResumed)
        #expect(!pair.client.events.contains { if case .earlyDataRejected = $0 { true } else { false } })
        #expect(firstDifference(pair.server.received, early + [UInt8](repeating: 9, count: 1096) + late) == nil)
    }

    @Test func earlyDataRejectedIsReportedAndResent() throws {
        let issuer = try TLSFixtures.server { $0.earlyDataEnabled = true }
        let client = try TLSFixtures.client()
        let ticket = try ticket(from: issuer, client: client)
        // Another server context (early data off, its own ticket key) cannot resume: 0-RTT is skipped.
        let other = try TLSFixtures.server()
        let pair = try TLSPair(client: client, server: other, resumption: ticket)
        let early = Array("GET /idempotent".utf8)
        #expect(try early.withUnsafeBytes { try pair.client.connection.sendEarlyData($0) } == early.count)
        pair.run()
        #expect(pair.client.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.client.connection.earlyDataAccepted == false)
        #expect(pair.client.events.contains(.earlyDataRejected(byteCount: early.count)))
        #expect(pair.server.received.isEmpty)
        #expect(try pair.client.connection.resendRejectedEarlyData() == early.count)
        pair.run()
        #expect(pair.server.received == early)
    }

    @Test func earlyDataNeedsATicketAndMustComeFirst() throws {
        let client = try TLSFixtures.client()
        let fresh = try TLSConnection.client(context: client, serverName: "localhost")
        #expect(try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try fresh.sendEarlyData($0) } == 0)
        _ = try fresh.process { _ in }
        #expect(throws: TLSError.self) { try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try fresh.sendEarlyData($0) } }
    }
}
