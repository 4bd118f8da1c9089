// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh session-cache
// with swiftc, together with tools/fuzz/SessionCacheFuzzMain.swift, against the modules of a
// sanitizer-instrumented SwiftPM build.
import BraidCore
import BraidTLS
import Foundation

@testable import Braid
@testable import BraidQUIC

/// One fuzz input through the session-cache file format (`QUIC.SessionCache`, which is also
/// `TLS.SessionCache`) and the ticket formats inside it. Byte 0 picks the mode:
/// - even: the rest is a cache file. `SessionCache.decode` keeps the entries whose digest
///   matches; each is parsed as `SessionCache.take` and `takeTLS` parse it, and every ticket
///   that parses is handed to its engine as a connection would: a QUIC client connection
///   resuming with it writes its first flight, a TLS client engine its ClientHello. The
///   entries re-encode to a file that decodes to the same entries.
/// - odd: the rest is one ticket, parsed as a QUIC and as a TLS ticket, each of which must
///   re-serialize to bytes that parse to the same ticket. These are not handed to GnuTLS: only
///   tickets a file's digest vouches for reach it, as in the cache (GnuTLS does not survive
///   every corrupted session, which is why the file carries digests).
/// Nothing may trap; a ticket the engines refuse is a typed error.
final class SessionCacheFuzzInput {
    struct Outcome {
        var entries = 0
        var quicTickets = 0
        var tlsTickets = 0
        /// QUIC client connections that resumed with a ticket and wrote their first flight.
        var quicFirstFlights = 0
        /// TLS client engines that wrote a ClientHello with a ticket.
        var tlsClientHellos = 0
        /// Errors the engines threw (typed).
        var engineErrors = 0
    }

    static let start = QUICInstant(nanoseconds: 1_000_000_000_000)
    static let path = QUICPath(local: QUICAddress(ip: "198.51.100.1", port: 40000)!, remote: QUICAddress(ip: "192.0.2.1", port: 4433)!)
    let quic: QUICClientContext
    let tls: TLSClientContext

    /// - Parameter fixtures: the directory with ca.pem.
    init(fixtures: String) throws {
        var quicConfiguration = QUICClientConfiguration(alpn: ["echo", "perf"])
        quicConfiguration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile(fixtures + "/ca.pem"))
        quic = try QUICClientContext(configuration: quicConfiguration)
        var tlsConfiguration = TLSClientConfiguration(alpn: ["echo"])
        tlsConfiguration.verification = TLSCertificateVerification(trustRoots: .certificateAuthorityFile(fixtures + "/ca.pem"))
        tls = try TLSClientContext(configuration: tlsConfiguration)
    }

    func run(_ input: [UInt8]) -> Outcome {
        guard let mode = input.first else { return Outcome() }
        var outcome = Outcome()
        let bytes = Array(input.dropFirst())
        if mode & 1 == 1 {
            if let ticket = QUICResumptionTicket(serialized: bytes) {
                outcome.quicTickets += 1
                precondition(QUICResumptionTicket(serialized: ticket.serialized()) == ticket, "a QUIC ticket does not survive its byte form")
            }
            if let ticket = TLSSessionTicket(serialized: bytes) {
                outcome.tlsTickets += 1
                precondition(TLSSessionTicket(serialized: ticket.serialized()) == ticket, "a TLS ticket does not survive its byte form")
            }
            return outcome
        }
        let entries = QUIC.SessionCache.decode(bytes)
        outcome.entries = entries.count
        precondition(QUIC.SessionCache.decode(QUIC.SessionCache.encode(entries)) == entries, "entries do not survive the file format")
        for (_, ticketBytes) in entries.sorted(by: { $0.key < $1.key }) {
            if let ticket = QUICResumptionTicket(serialized: ticketBytes) {
                outcome.quicTickets += 1
                resume(with: ticket, &outcome)
            }
            if let ticket = TLSSessionTicket(serialized: ticketBytes) {
                outcome.tlsTickets += 1
                resume(with: ticket, &outcome)
            }
        }
        return outcome
    }

    /// A QUIC client connection to the ticket's server, as `NetworkConnection` makes one.
    private func resume(with ticket: QUICResumptionTicket, _ outcome: inout Outcome) {
        do {
            let connection = try quic.connect(path: Self.path, serverName: ticket.serverName, resumption: ticket, now: Self.start)
            // 0-RTT data rides with the first flight when the ticket allows it.
            if let stream = try? connection.openStream(bidirectional: true) {
                _ = try? connection.send(streamID: stream, bytes: [1, 2, 3], fin: true)
            }
            let datagrams = connection.pollTransmits(now: Self.start).reduce(0) { $0 + $1.segmentCount }
            if datagrams > 0 { outcome.quicFirstFlights += 1 }
            while connection.pollEvent() != nil {}
        } catch {
            outcome.engineErrors += 1
        }
    }

    /// A TLS client engine with the ticket, as a `NetworkConnection<TLS>` makes one.
    private func resume(with ticket: TLSSessionTicket, _ outcome: inout Outcome) {
        do {
            let engine = try TLSConnection.client(context: tls, serverName: ticket.serverName, resumption: ticket)
            if ticket.maxEarlyDataSize > 0 { _ = try [UInt8](repeating: 7, count: 100).withUnsafeBytes { try engine.sendEarlyData($0) } }
            _ = try engine.process { _ in }
            if engine.pendingCiphertextCount > 0 { outcome.tlsClientHellos += 1 }
        } catch {
            outcome.engineErrors += 1
        }
    }
}

extension SessionCacheFuzzInput {
    /// The corpus's seeds, from real handshakes in memory (tools/fuzz.sh session-cache --seeds
    /// writes them; the committed ones were made so): a cache file holding a QUIC and a TLS
    /// ticket as `NetworkConnection` stores them, each ticket alone, the file with one byte of
    /// a ticket flipped, and a file in another format.
    func seeds(fixtures: String) throws -> [String: [UInt8]] {
        let quicTicket = try Self.issueQUICTicket(client: quic, fixtures: fixtures).serialized()
        let tlsTicket = try Self.issueTLSTicket(client: tls, fixtures: fixtures).serialized()
        let file = QUIC.SessionCache.encode(["localhost:4433": quicTicket, "tls:localhost:443": tlsTicket])
        var corrupted = file
        // A byte inside the first entry's ticket ("localhost:4433" sorts first).
        corrupted[QUIC.SessionCache.magic.count + 4 + 14 + 4 + quicTicket.count / 2] ^= 0x10
        return [
            "quic-and-tls-tickets": [0] + file,
            "quic-ticket": [1] + quicTicket,
            "tls-ticket": [1] + tlsTicket,
            "one-entry-corrupted": [0] + corrupted,
            "other-format": [0] + Array("BSC0".utf8) + file.dropFirst(4),
        ]
    }

    /// Connects a QUIC client to a server endpoint in memory until the server's ticket arrives.
    static func issueQUICTicket(client: QUICClientContext, fixtures: String) throws -> QUICResumptionTicket {
        let server = try QUICServerEndpoint(configuration: QUICServerConfiguration(
            alpn: ["echo"], certificateChainFile: fixtures + "/server.pem", privateKeyFile: fixtures + "/server-key.pem"))
        var now = start
        let connection = try client.connect(path: path, serverName: "localhost", now: now)
        let serverPath = QUICPath(local: path.remote, remote: path.local)
        var accepted: QUICConnection?
        for _ in 0..<50 {
            for transmit in connection.pollTransmits(now: now) {
                for datagram in transmit.datagrams {
                    if let routed = server.receive(datagram: Array(datagram), path: serverPath, now: now) { accepted = routed }
                }
            }
            for transmit in (accepted?.pollTransmits(now: now) ?? []) + server.pollEndpointTransmits() {
                for datagram in transmit.datagrams { connection.receive(datagram: Array(datagram), path: path, now: now) }
            }
            while let event = connection.pollEvent() {
                if case .resumptionTicket(let ticket) = event { return ticket }
            }
            now = now + .milliseconds(10)
        }
        throw QUICError.configuration("no resumption ticket after 50 rounds")
    }

    /// Runs a TLS handshake between two engines in memory until the server's ticket arrives.
    static func issueTLSTicket(client: TLSClientContext, fixtures: String) throws -> TLSSessionTicket {
        let server = try TLSServerContext(configuration: TLSServerConfiguration(
            alpn: ["echo"], certificateChainFile: fixtures + "/server.pem", privateKeyFile: fixtures + "/server-key.pem"))
        let clientEngine = try TLSConnection.client(context: client, serverName: "localhost")
        let serverEngine = try TLSConnection.server(context: server)
        func move(from sender: TLSConnection, to receiver: TLSConnection) {
            while sender.pendingCiphertextCount > 0, sender.withPendingCiphertext({ receiver.receiveCiphertext($0) }) > 0 {}
        }
        for _ in 0..<50 {
            for event in try clientEngine.process(deliver: { _ in }) {
                if case .sessionTicket(let ticket) = event { return ticket }
            }
            move(from: clientEngine, to: serverEngine)
            _ = try serverEngine.process(deliver: { _ in })
            move(from: serverEngine, to: clientEngine)
        }
        throw TLSError.invalidState("no session ticket after 50 rounds")
    }
}
