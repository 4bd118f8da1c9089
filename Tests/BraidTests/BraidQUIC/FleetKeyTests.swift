import BraidTLS
import Testing
@testable import BraidQUIC

/// Two servers of one fleet, each with its own key ring read from the same secrets (as two
/// hosts reading one key file): what one server hands a client (a Retry token, a NEW_TOKEN
/// token, a session ticket) works on the other, also while the other has moved on to a newer
/// generation, until the overlap window after the old one left its list has passed.
@Suite struct FleetKeyTests {
    static let oldSecret = [UInt8](repeating: 0x11, count: 32)
    static let newSecret = [UInt8](repeating: 0x22, count: 32)
    static let overlap = Duration.seconds(60)

    static func server(secrets: [[UInt8]], retry: QUICRetryPolicy = .automatic) throws -> (QUICServerEndpoint, ServerKeyRing) {
        let ring = try ServerKeyRing(secrets: secrets, overlap: overlap)
        var configuration = Fixtures.serverConfiguration()
        configuration.keyRing = ring
        configuration.retry = retry
        return (try QUICServerEndpoint(configuration: configuration), ring)
    }

    /// A ticket (with its NEW_TOKEN token) from server A.
    static func ticketFromA(context: QUICClientContext) throws -> QUICResumptionTicket {
        let (a, _) = try server(secrets: [oldSecret])
        let network = SimulatedNetwork(server: a)
        var ticket: QUICResumptionTicket?
        network.onEvent = { connection, event in
            if case .resumptionTicket(let issued) = event, connection.role == .client { ticket = issued }
        }
        let client = try network.connect(context)
        #expect(network.run { client.isEstablished && ticket?.token.isEmpty == false })
        client.close(now: network.now)
        network.settle()
        return try #require(ticket)
    }

    struct Resumption {
        let established: Bool
        let earlyDataAccepted: Bool
        let retries: Int
    }

    /// Resumes on `b` with `ticket`, sending a request in 0-RTT.
    static func resume(on b: QUICServerEndpoint, network: SimulatedNetwork, context: QUICClientContext, ticket: QUICResumptionTicket) throws
        -> Resumption
    {
        network.onEvent = { _, _ in }
        let client = try network.connect(context, resumption: ticket)
        let stream = try client.openStream(bidirectional: true)
        try client.send(streamID: stream, bytes: [1, 2, 3], fin: true)
        let established = network.run { client.isEstablished }
        let result = Resumption(established: established, earlyDataAccepted: client.earlyDataAccepted, retries: b.retriesSent)
        client.close(now: network.now)
        network.settle()
        return result
    }

    @Test func ticketAndTokenFromOneServerWorkOnAnother() throws {
        // B starts first: GnuTLS's replay filter refuses 0-RTT for tickets older than itself.
        let (b, _) = try Self.server(secrets: [Self.oldSecret], retry: .always)
        let context = try Fixtures.client()
        let ticket = try Self.ticketFromA(context: context)
        let resumed = try Self.resume(on: b, network: SimulatedNetwork(server: b), context: context, ticket: ticket)
        #expect(resumed.established)
        #expect(resumed.earlyDataAccepted, "B opens A's ticket")
        #expect(resumed.retries == 0, "B takes A's NEW_TOKEN token as proof of the address")
    }

    @Test func afterRotationTheOldGenerationIsAcceptedDuringTheOverlapOnly() throws {
        let (b, ring) = try Self.server(secrets: [Self.oldSecret], retry: .always)
        let context = try Fixtures.client()
        let ticket = try Self.ticketFromA(context: context)
        let network = SimulatedNetwork(server: b)
        try ring.update(secrets: [Self.newSecret], now: network.now)
        #expect(ring.current !== ring.accepted(at: network.now).last)

        let during = try Self.resume(on: b, network: network, context: context, ticket: ticket)
        #expect(during.established)
        #expect(during.earlyDataAccepted, "an old-generation ticket resumes during the overlap")
        #expect(during.retries == 0, "an old-generation token proves the address during the overlap")

        network.advance(by: Self.overlap + .seconds(1))
        #expect(ring.accepted(at: network.now).count == 1)
        let after = try Self.resume(on: b, network: network, context: context, ticket: ticket)
        #expect(after.established, "a full handshake still works")
        #expect(!after.earlyDataAccepted, "the old ticket is refused after the overlap")
        #expect(after.retries == 1, "the old token is refused after the overlap")
    }

    @Test func retryTokenMintedOnOneServerIsAcceptedByAnother() throws {
        for rotatePastWindow in [false, true] {
            let (a, _) = try Self.server(secrets: [Self.oldSecret], retry: .always)
            let (b, ringB) = try Self.server(secrets: [Self.oldSecret], retry: .always)
            let network = SimulatedNetwork(server: a)
            if rotatePastWindow {
                try ringB.update(secrets: [Self.newSecret], now: network.now)
                network.advance(by: Self.overlap + .seconds(1))
            }
            let client = try network.connect(Fixtures.client())
            #expect(network.run { a.retriesSent == 1 })
            // The client's next Initial, carrying A's Retry token, lands on B.
            network.server = b
            let established = network.run(for: .seconds(5)) { client.isEstablished }
            #expect(b.retriesSent == 0)
            #expect(a.connectionCount == 0)
            if rotatePastWindow {
                #expect(!established, "B refuses a token of a generation past its overlap")
                #expect(b.connectionCount == 0)
            } else {
                #expect(established)
                #expect(b.connectionCount == 1)
            }
        }
    }

    @Test func keyFilesListSecretsInHexWithTheMintingOneFirst() throws {
        let secrets = try ServerKeyRing.parseKeyFile(
            """
            # fleet keys
            \(String(repeating: "ab", count: 32))

              \(String(repeating: "01", count: 16))
            """)
        #expect(secrets == [[UInt8](repeating: 0xab, count: 32), [UInt8](repeating: 0x01, count: 16)])
        #expect(throws: TLSError.self) { try ServerKeyRing.parseKeyFile("abcd\n") }
        #expect(throws: TLSError.self) { try ServerKeyRing.parseKeyFile("# nothing\n") }
        #expect(throws: TLSError.self) { try ServerKeyRing.parseKeyFile(String(repeating: "zz", count: 16)) }
    }

    @Test func onlyTheFirstPSKIdentityOfAClientHelloIsRead() {
        // legacy_version, random, empty session id, one suite, null compression, then a
        // pre_shared_key extension with identity 0xAABBCC.
        var hello: [UInt8] = [0x03, 0x03] + [UInt8](repeating: 7, count: 32) + [0] + [0, 2, 0x13, 0x01] + [1, 0]
        let psk: [UInt8] = [0, 9, 0, 3, 0xaa, 0xbb, 0xcc, 0, 0, 0, 0]
        let extensions: [UInt8] = [0, 41, 0, UInt8(psk.count)] + psk
        hello += [0, UInt8(extensions.count)] + extensions
        #expect(hello.withUnsafeBytes { ServerKeyRing.firstPSKIdentity(inClientHello: $0) } == [0xaa, 0xbb, 0xcc])
        // Truncated anywhere: nothing, and no read past the end.
        // (The last 4 bytes, the ticket age, are not needed for the identity.)
        for cut in 0..<hello.count - 4 {
            #expect(hello.prefix(cut).withUnsafeBytes { ServerKeyRing.firstPSKIdentity(inClientHello: $0) } == nil)
        }
    }
}
