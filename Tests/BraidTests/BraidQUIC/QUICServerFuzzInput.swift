// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh quic-server
// with swiftc, together with tools/fuzz/QUICServerFuzzMain.swift, against the modules of a
// sanitizer-instrumented SwiftPM build.
import BraidCore
import BraidTLS
import Foundation

@testable import BraidQUIC

/// One fuzz input through a QUIC server endpoint with a real certificate: a sequence of
/// datagrams from any of eight client addresses, at moments the input picks, each routed by
/// `receive` (new connections, datagrams to existing ones, Version Negotiation, Retry, resets,
/// refusals), the connections it returns written and timed out as a server's owner does. What
/// must hold for any bytes:
/// - no trap and no sanitizer report;
/// - the live counts stay within the configured limits;
/// - no client address gets more than 3x the bytes it sent (RFC 9000 §8), unless a Retry
///   token proved it (no input completes a handshake: the server's key share is fresh);
/// - once every connection's timers have run out, the endpoint holds nothing: no connection,
///   no half-open handshake, no route.
///
/// Input: byte 0 picks the configuration (`variant`), then records of one control byte (bits
/// 0-2: the client address, bits 3-5: how far the clock moves first, bits 6-7: the ECN mark),
/// a big-endian UInt16 length (cut to what is left) and the datagram.
final class QUICServerFuzzInput {
    struct Outcome {
        var datagrams = 0
        /// `receive` returned a connection it had just created.
        var accepted = 0
        /// `receive` returned a connection that existed before the datagram.
        var routed = 0
        /// New connections whose Initial carried a valid token.
        var proven = 0
        var statistics = QUICServerStatistics()
        var bytesReceived = 0
        var bytesSent = 0
    }

    static let serverAddress = QUICAddress(ip: "192.0.2.1", port: 443)!
    static let clientAddresses: [QUICAddress] = [
        QUICAddress(ip: "198.51.100.1", port: 40000)!, QUICAddress(ip: "198.51.100.1", port: 40001)!,
        QUICAddress(ip: "198.51.100.2", port: 40000)!, QUICAddress(ip: "203.0.113.9", port: 443)!,
        QUICAddress(ip: "2001:db8::1", port: 40000)!, QUICAddress(ip: "2001:db8::2", port: 40000)!,
        QUICAddress(ip: "2001:db8:1::1", port: 5)!, QUICAddress(ip: "::ffff:198.51.100.1", port: 40000)!,
    ]
    /// The clock moves by one of these before a datagram.
    static let steps: [Duration] = [.zero, .milliseconds(1), .milliseconds(25), .milliseconds(300), .seconds(1), .seconds(3), .seconds(11), .seconds(40)]
    static let start = QUICInstant(nanoseconds: 1_000_000_000_000)
    /// Fixed, so Retry tokens in the corpus stay valid (they are checked against the input's clock).
    static let staticSecret = [UInt8](repeating: 0x5A, count: 32)
    static let alpn = ["echo", "perf"]

    let certificate: String
    let privateKey: String
    /// Loaded once: parsing the PEM files for every input would take most of the time.
    let credentials: TLSCredentials

    /// - Parameter fixtures: the directory with server.pem and server-key.pem.
    init(fixtures: String) throws {
        certificate = fixtures + "/server.pem"
        privateKey = fixtures + "/server-key.pem"
        credentials = try TLSCredentials.server(certificateChainFile: certificate, privateKeyFile: privateKey)
    }

    /// Byte 0: bits 0-1 the Retry policy (never, always, automatic with threshold 2, and
    /// automatic with the defaults), bit 2 small limits (3 connections, 2 half-open, 2 per
    /// address) or the defaults, bit 3 0-RTT off.
    func configuration(variant: UInt8) -> QUICServerConfiguration {
        var configuration = QUICServerConfiguration(alpn: Self.alpn, certificateChainFile: certificate, privateKeyFile: privateKey)
        configuration.staticSecret = Self.staticSecret
        switch variant & 3 {
        case 0: configuration.retry = .never
        case 1: configuration.retry = .always
        case 2: configuration.retryThreshold = 2
        default: break
        }
        if variant & 4 != 0 {
            configuration.maxConnections = 3
            configuration.maxHalfOpenConnections = 2
            configuration.maxConnectionsPerAddress = 2
        }
        configuration.earlyDataEnabled = variant & 8 == 0
        return configuration
    }

    func endpoint(variant: UInt8) throws -> QUICServerEndpoint {
        // Keys of its own (ticket key, 0-RTT replay filter), so no input sees another's state.
        try QUICServerEndpoint(
            configuration: configuration(variant: variant), keys: QUICServerKeys(staticSecret: Self.staticSecret), credentials: credentials)
    }

    /// The input's datagrams: (control byte, bytes).
    static func records(_ input: ArraySlice<UInt8>) -> [(control: UInt8, datagram: ArraySlice<UInt8>)] {
        var records: [(UInt8, ArraySlice<UInt8>)] = []
        var rest = input
        while rest.count >= 3 {
            let control = rest[rest.startIndex]
            let length = Int(rest[rest.startIndex + 1]) << 8 | Int(rest[rest.startIndex + 2])
            rest = rest.dropFirst(3)
            records.append((control, rest.prefix(length)))
            rest = rest.dropFirst(length)
        }
        return records
    }

    /// The inverse of `records` (for writing seeds).
    static func encode(variant: UInt8, _ records: [(control: UInt8, datagram: [UInt8])]) -> [UInt8] {
        var out = [variant]
        for (control, datagram) in records {
            out += [control, UInt8(datagram.count >> 8), UInt8(datagram.count & 0xFF)] + datagram
        }
        return out
    }

    func run(_ input: [UInt8]) -> Outcome {
        guard let variant = input.first else { return Outcome() }
        let server: QUICServerEndpoint
        do {
            server = try endpoint(variant: variant)
        } catch {
            preconditionFailure("the fuzz server cannot start: \(error)")
        }
        let limits = server.configuration
        var outcome = Outcome()
        var now = Self.start
        var connections: [ObjectIdentifier: QUICConnection] = [:]
        var received: [QUICAddress: Int] = [:]
        var sent: [QUICAddress: Int] = [:]
        var proven: Set<QUICAddress> = []

        func drive(_ connection: QUICConnection) {
            for transmit in connection.pollTransmits(now: now) {
                sent[transmit.path.remote, default: 0] += transmit.bytes.count
                outcome.bytesSent += transmit.bytes.count
            }
            while connection.pollEvent() != nil {}
            server.applyRoutingChanges(of: connection)
            if connection.isTerminated { connections[ObjectIdentifier(connection)] = nil }
        }
        func flushEndpoint() {
            for connection in server.pollEvictedConnections() { drive(connection) }
            for transmit in server.pollEndpointTransmits() {
                sent[transmit.path.remote, default: 0] += transmit.bytes.count
                outcome.bytesSent += transmit.bytes.count
            }
        }
        func runTimers() {
            for connection in connections.values {
                if let deadline = connection.nextDeadline, deadline <= now { connection.handleTimeout(now: now) }
                drive(connection)
            }
        }
        func checkLimits() {
            precondition(server.connectionCount <= limits.maxConnections, "more connections than the limit")
            precondition(server.halfOpenCount <= limits.maxHalfOpenConnections, "more half-open handshakes than the limit")
            for (address, bytes) in sent where !proven.contains(address) {
                precondition(bytes <= 3 * (received[address] ?? 0), "more than 3x the bytes \(address) sent went back to it")
            }
        }

        for (control, datagram) in Self.records(input.dropFirst()) {
            let step = Self.steps[Int(control >> 3) & 7]
            if step > .zero {
                now = now + step
                runTimers()
            }
            let remote = Self.clientAddresses[Int(control & 7)]
            let ecn: ECN = [.notECT, .ect0, .ect1, .congestionExperienced][Int(control >> 6)]
            received[remote, default: 0] += datagram.count
            outcome.bytesReceived += datagram.count
            outcome.datagrams += 1
            let path = QUICPath(local: Self.serverAddress, remote: remote)
            let connection = Array(datagram).withUnsafeBytes { server.receive(datagram: $0, path: path, ecn: ecn, now: now) }
            if let connection {
                if connections[ObjectIdentifier(connection)] == nil {
                    precondition(connection.isNewlyAccepted, "a connection the owner never saw was not new")
                    outcome.accepted += 1
                    if server.isAddressProven(of: connection) {
                        proven.insert(remote)
                        outcome.proven += 1
                    }
                    connections[ObjectIdentifier(connection)] = connection
                } else {
                    outcome.routed += 1
                }
                drive(connection)
            }
            flushEndpoint()
            checkLimits()
        }
        outcome.statistics = server.statistics

        // Every timer runs out: each connection closes, and the endpoint forgets it.
        for _ in 0..<64 where !connections.isEmpty {
            guard let next = connections.values.compactMap(\.nextDeadline).min() else { break }
            now = max(now, next)
            runTimers()
            flushEndpoint()
        }
        checkLimits()
        precondition(connections.isEmpty, "\(connections.count) connections never ended")
        precondition(server.connectionCount == 0 && server.halfOpenCount == 0, "the endpoint still counts connections")
        precondition(server.routeCount == 0, "routes outlived their connections")
        return outcome
    }
}

extension QUICServerFuzzInput {
    /// The corpus's seeds, made with Braid's own client (tools/fuzz.sh quic-server --seeds
    /// writes them; the committed ones were made so): real Initials, a real Retry exchange at
    /// the input's clock, and what the endpoint answers by itself.
    func seeds(fixtures: String) throws -> [String: [UInt8]] {
        var configuration = QUICClientConfiguration(alpn: ["echo"])
        configuration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile(fixtures + "/ca.pem"))
        let context = try QUICClientContext(configuration: configuration)
        func control(address: Int, step: Int = 0) -> UInt8 { UInt8(address | step << 3) }
        /// A fresh client's first datagrams, from client address `address`.
        func firstFlight(address: Int) throws -> (QUICConnection, [[UInt8]]) {
            let path = QUICPath(local: Self.clientAddresses[address], remote: Self.serverAddress)
            let client = try context.connect(path: path, serverName: "localhost", now: Self.start)
            return (client, client.pollTransmits(now: Self.start).flatMap { $0.datagrams.map(Array.init) })
        }
        var seeds: [String: [UInt8]] = [:]

        let (client, initial) = try firstFlight(address: 0)
        seeds["client-initial"] = Self.encode(variant: 0, initial.map { (control(address: 0), $0) })
        seeds["initial-twice"] = Self.encode(variant: 0, (initial + initial).map { (control(address: 0), $0) })
        // The client's probe after its PTO (the clock moves 1 s first): same connection ID, routed.
        client.handleTimeout(now: Self.start + .seconds(1))
        let probe = client.pollTransmits(now: Self.start + .seconds(1)).flatMap { $0.datagrams.map(Array.init) }
        seeds["initial-then-probe"] = Self.encode(
            variant: 0, initial.map { (control(address: 0), $0) } + probe.map { (control(address: 0, step: 4), $0) })

        // Retry on: the endpoint's Retry goes to the client, whose next Initial carries the token.
        let retryServer = try endpoint(variant: 1)
        let (retried, retriedInitial) = try firstFlight(address: 1)
        let serverPath = QUICPath(local: Self.serverAddress, remote: Self.clientAddresses[1])
        for datagram in retriedInitial { _ = retryServer.receive(datagram: datagram, path: serverPath, now: Self.start) }
        let clientPath = QUICPath(local: Self.clientAddresses[1], remote: Self.serverAddress)
        for transmit in retryServer.pollEndpointTransmits() {
            for datagram in transmit.datagrams { retried.receive(datagram: Array(datagram), path: clientPath, now: Self.start) }
        }
        let withToken = retried.pollTransmits(now: Self.start).flatMap { $0.datagrams.map(Array.init) }
        seeds["retry-then-token"] = Self.encode(variant: 1, (retriedInitial + withToken).map { (control(address: 1), $0) })

        // An unknown version (the Initial's version field) gets Version Negotiation.
        var unknownVersion = initial[0]
        unknownVersion.replaceSubrange(1..<5, with: [0x1A, 0x2A, 0x3A, 0x4A])
        seeds["unknown-version"] = Self.encode(variant: 0, [(control(address: 4), unknownVersion)])
        // A short header for no connection gets a stateless reset.
        let shortHeader: [UInt8] = [0x40] + [UInt8](repeating: 0xAB, count: QUICServerEndpoint.connectionIDLength) + [UInt8](repeating: 0x11, count: 40)
        seeds["unknown-short-header"] = Self.encode(variant: 0, [(control(address: 2), shortHeader)])

        // Small limits: three clients from one address (two allowed), then others (two half-open allowed).
        var flood: [(UInt8, [UInt8])] = []
        for address in [0, 1, 0, 2, 3] {
            let (_, datagrams) = try firstFlight(address: address)
            flood += datagrams.map { (control(address: address), $0) }
        }
        seeds["small-limits-flood"] = Self.encode(variant: 4, flood)
        return seeds
    }
}
