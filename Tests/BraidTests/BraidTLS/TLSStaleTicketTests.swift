import BraidCore
import BraidTLS
import Testing

/// A client holding a ticket the server no longer honours (too old, or sealed under a key the
/// server rotated away) does a full handshake: it never fails because of the ticket, whether or
/// not it queued 0-RTT data.
@Suite struct TLSStaleTicketTests {
    /// A ticket from a full handshake with `server`.
    func ticket(from server: TLSServerContext, client: TLSClientContext) throws -> TLSSessionTicket {
        let pair = try TLSPair(client: client, server: server)
        pair.run()
        #expect(pair.client.error == nil)
        return try #require(pair.client.sessionTickets.last)
    }

    /// Connects with `ticket`, offering `early` as 0-RTT data first, then `later`; returns the pair.
    func resume(
        with ticket: TLSSessionTicket, server: TLSServerContext, client: TLSClientContext, early: [UInt8], later: [UInt8]
    ) throws -> (pair: TLSPair, earlyTaken: Int) {
        let pair = try TLSPair(client: client, server: server, resumption: ticket)
        let taken = try early.withUnsafeBytes { try pair.client.connection.sendEarlyData($0) }
        pair.run()
        if pair.client.events.contains(.earlyDataRejected(byteCount: taken)) {
            // The refused 0-RTT bytes go again first.
            #expect(try pair.client.connection.resendRejectedEarlyData() == taken)
        }
        pair.client.outgoing = Array(early[taken...]) + later
        pair.run()
        return (pair, taken)
    }

    /// The ticket outlived the lifetime the server gave it (1 second here, so two seconds is
    /// old): GnuTLS would drop it while writing a ClientHello that already promises 0-RTT, and
    /// fail; the client leaves it unused and does a full handshake.
    @Test func aTicketPastItsLifetimeMeansAFullHandshake() async throws {
        let server = try TLSFixtures.server { $0.earlyDataEnabled = true; $0.ticketLifetime = 1 }
        let client = try TLSFixtures.client()
        let stale = try ticket(from: server, client: client)
        let validity = try #require(stale.validity)
        #expect(validity.lifetime == 1)
        #expect(stale.maxEarlyDataSize > 0)
        #expect(try await untilGnuTLSDropsTicket(validity))
        #expect(!stale.isUsable())
        let early = Array("GET /idempotent".utf8), later = Array(" and more".utf8)
        let (pair, taken) = try resume(with: stale, server: server, client: client, early: early, later: later)
        #expect(taken == 0, "a stale ticket carries no 0-RTT data")
        #expect(pair.client.error == nil)
        #expect(pair.server.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(!pair.client.connection.isResumed)
        #expect(!pair.server.connection.isResumed)
        #expect(pair.server.received == early + later)
    }

    /// The server's fleet rotated the key that sealed the ticket out of its ring: it cannot open
    /// the ticket, refuses the 0-RTT data and does a full handshake; the client sends the
    /// refused data again, in order.
    @Test func aTicketUnderARotatedKeyMeansAFullHandshake() throws {
        let ring = try ServerKeyRing(secrets: [[UInt8](repeating: 0x31, count: 32)], overlap: .zero)
        var configuration = TLSServerConfiguration(
            alpn: ["echo"], certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        configuration.earlyDataEnabled = true
        let server = try TLSServerContext(configuration: configuration, ticketKeyRing: ring)
        let client = try TLSFixtures.client()
        let ticket = try ticket(from: server, client: client)
        #expect(ticket.isUsable())
        try ring.update(secrets: [[UInt8](repeating: 0x32, count: 32)], now: .now())
        let early = Array("GET /idempotent".utf8), later = Array(" and more".utf8)
        let (pair, taken) = try resume(with: ticket, server: server, client: client, early: early, later: later)
        #expect(taken == early.count)
        #expect(pair.client.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(!pair.client.connection.isResumed)
        #expect(!pair.client.connection.earlyDataAccepted)
        #expect(pair.server.received == early + later)
    }

    /// A ticket another server (another key) issued: a full handshake, the 0-RTT data resent.
    @Test func aTicketFromAnotherServerMeansAFullHandshake() throws {
        let issuer = try TLSFixtures.server { $0.earlyDataEnabled = true }
        let other = try TLSFixtures.server { $0.earlyDataEnabled = true }
        let client = try TLSFixtures.client()
        let ticket = try ticket(from: issuer, client: client)
        let early = Array("GET /idempotent".utf8), later = Array(" and more".utf8)
        let (pair, taken) = try resume(with: ticket, server: other, client: client, early: early, later: later)
        #expect(taken == early.count)
        #expect(pair.client.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(!pair.client.connection.isResumed)
        #expect(!pair.server.connection.isResumed)
        #expect(pair.server.received == early + later)
    }

    /// A ticket's lifetime survives its byte form; a ticket near the end of its lifetime is
    /// left unused, and one that arrived "in the future" (the clock moved back) too.
    @Test func usabilityFollowsTheLifetime() throws {
        let validity = TLSTicketValidity(arrival: 1_000_000, lifetime: 3600)
        #expect(validity.isUsable(at: 1_000_000))
        #expect(validity.isUsable(at: 1_000_000 + 3_539_000))
        #expect(!validity.isUsable(at: 1_000_000 + 3_541_000), "within a minute of its end")
        #expect(!validity.isUsable(at: 999_999), "arrived in the future")
        #expect(!validity.isExpiredForGnuTLS(at: 1_000_000 + 3_600_999))
        #expect(validity.isExpiredForGnuTLS(at: 1_000_000 + 3_601_000))
        let server = try TLSFixtures.server { $0.ticketLifetime = 600 }
        let issued = try ticket(from: server, client: try TLSFixtures.client())
        #expect(issued.validity?.lifetime == 600)
        #expect(TLSSessionTicket(serialized: issued.serialized()) == issued)
        // GnuTLS divides by the lifetime: 0 is refused up front.
        #expect(throws: TLSError.configuration("ticketLifetime must be at least 1 second")) {
            _ = try TLSFixtures.server { $0.ticketLifetime = 0 }
        }
    }
}
