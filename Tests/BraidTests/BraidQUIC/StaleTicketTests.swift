import BraidCore
import BraidTLS
import Testing

@testable import BraidQUIC

/// A QUIC client holding a ticket the server no longer honours (too old, or sealed under a key
/// the server rotated away) does a full handshake: its first flight goes out, the stream it
/// opened before the handshake arrives whole, and the connection reports it did not resume.
@Suite struct StaleTicketTests {
    let helpers = ResumptionTests()

    /// The ticket outlived the lifetime the server gave it (1 second here, so two seconds is old).
    /// GnuTLS would drop it while writing a ClientHello that already promises 0-RTT and fail
    /// the client's first write (ngtcp2's client_initial callback); the client leaves it
    /// unused, does a full handshake and sends no 0-RTT.
    @Test func aTicketPastItsLifetimeMeansAFullHandshake() async throws {
        let server = try Fixtures.server { $0.ticketLifetime = 1 }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let stale = try helpers.ticket(network: network, context: context)
        #expect(stale.validity.lifetime == 1)
        #expect(try await untilGnuTLSDropsTicket(stale.validity))
        #expect(!stale.isUsable())
        // Without the ticket the client knows none of the server's limits before the
        // handshake (no 0-RTT): it opens its stream once established.
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        let client = try network.connect(context, resumption: stale)
        #expect(network.run { client.isEstablished })
        #expect(!client.isResumed)
        #expect(!client.attemptedEarlyData)
        let request = pattern(seed: 7, count: 2000)
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: request, fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        let accepted = try #require(serverSide)
        #expect(sink.bytes(accepted, id) == request)
        #expect(sink.earlyBytes[ObjectIdentifier(accepted)] == nil)
    }

    /// The server's fleet rotated the key that sealed the ticket out of its ring: it refuses
    /// the 0-RTT data and does a full handshake; the client sends the stream again.
    @Test func aTicketUnderARotatedKeyMeansAFullHandshake() throws {
        let ring = try ServerKeyRing(secrets: [[UInt8](repeating: 0x41, count: 32)], overlap: .zero)
        let server = try Fixtures.server { $0.keyRing = ring }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let ticket = try helpers.ticket(network: network, context: context)
        #expect(ticket.isUsable())
        try ring.update(secrets: [[UInt8](repeating: 0x42, count: 32)], now: network.now)
        let request = pattern(seed: 8, count: 2000)
        var rejected = false
        let sent = try helpers.resumeAndSend(request, network: network, context: context, ticket: ticket) { connection, event in
            if connection.role == .client, event == .earlyDataRejected { rejected = true }
        }
        #expect(network.run { sent.client.isEstablished })
        #expect(rejected)
        #expect(!sent.client.isResumed)
        #expect(network.run { sent.server.isEstablished })
        #expect(!sent.server.isResumed)
        #expect(!sent.client.earlyDataAccepted)
        #expect(sent.sink.bytes(sent.server, sent.stream) == request)
    }

    /// A ticket another server (another key) issued: a full handshake, the stream resent.
    @Test func aTicketFromAnotherServerMeansAFullHandshake() throws {
        let context = try Fixtures.client()
        let ticket = try helpers.ticket(network: SimulatedNetwork(server: try Fixtures.server()), context: context)
        let network = SimulatedNetwork(server: try Fixtures.server())
        let request = pattern(seed: 9, count: 2000)
        let sent = try helpers.resumeAndSend(request, network: network, context: context, ticket: ticket)
        #expect(network.run { sent.client.isEstablished })
        #expect(!sent.client.isResumed)
        #expect(!sent.client.earlyDataAccepted)
        #expect(sent.sink.bytes(sent.server, sent.stream) == request)
    }

    /// A fresh ticket still resumes, and says so; its lifetime survives its byte form.
    @Test func aFreshTicketResumes() throws {
        let network = SimulatedNetwork(server: try Fixtures.server { $0.ticketLifetime = 600 })
        let context = try Fixtures.client()
        let ticket = try helpers.ticket(network: network, context: context)
        #expect(ticket.validity.lifetime == 600)
        #expect(QUICResumptionTicket(serialized: ticket.serialized()) == ticket)
        let sent = try helpers.resumeAndSend([1, 2, 3], network: network, context: context, ticket: ticket)
        #expect(network.run { sent.client.isEstablished })
        #expect(sent.client.isResumed)
        // The server's handshake ends a flight after the client's.
        #expect(network.run { sent.server.isEstablished })
        #expect(sent.server.isResumed)
        #expect(sent.client.earlyDataAccepted)
    }
}
