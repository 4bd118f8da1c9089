import BraidTLS
import CBraid

/// Shared, immutable client state: TLS credentials (loading the system store is costly, so
/// build this once) and the secret behind our stateless-reset tokens.
///
/// ```swift
/// var configuration = QUICClientConfiguration(alpn: ["echo"])
/// configuration.verification = .init(trustRoots: .certificateAuthorityFile("ca.pem"))
/// let context = try QUICClientContext(configuration: configuration)
/// let connection = try context.connect(path: path, serverName: "localhost", now: now)
/// ```
package final class QUICClientContext: Sendable {
    package let configuration: QUICClientConfiguration
    let credentials: TLSCredentials
    let staticSecret: [UInt8]

    package init(configuration: QUICClientConfiguration) throws {
        guard !configuration.alpn.isEmpty else { throw QUICError.configuration("QUIC needs at least one ALPN") }
        try mappingTLSErrors { try configuration.verification.validate() }
        try configuration.transport.validate()
        self.configuration = configuration
        credentials = try mappingTLSErrors {
            try TLSCredentials.client(
                trust: configuration.verification.trustRoots, certificateChainFile: configuration.certificateChainFile,
                privateKeyFile: configuration.privateKeyFile)
        }
        var secret = [UInt8](repeating: 0, count: 32)
        fillRandom(&secret)
        staticSecret = secret
    }

    /// Starts a connection on `path`. `serverName` is sent as SNI (unless an IP literal) and is
    /// the name the certificate must carry. With a `ticket` for this server, the connection
    /// resumes and streams opened before the handshake completes travel as 0-RTT data; a ticket
    /// past (or near the end of) its lifetime is not used: a full handshake.
    package func connect(
        path: QUICPath, serverName: String, resumption ticket: QUICResumptionTicket? = nil, now: QUICInstant
    ) throws -> QUICConnection {
        let transport = configuration.transport
        // A stale ticket means a full handshake: GnuTLS would fail on it (`TLSTicketValidity`).
        let usableTicket = ticket.flatMap { $0.serverName == serverName && configuration.alpn.contains($0.alpn) && $0.isUsable() ? $0 : nil }
        var settings = transport.ngtcp2Settings(now: now)
        let token = usableTicket?.token ?? []
        let tokenStorage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(token.count, 1))
        defer { tokenStorage.deallocate() }
        _ = tokenStorage.initialize(from: token)
        if !token.isEmpty { settings.token = ngtcp2_vec(base: tokenStorage.baseAddress, len: token.count) }
        let destination = ConnectionID.random(length: 18)
        let setup = QUICConnection.Setup(
            role: .client, path: path, version: UInt32(NGTCP2_PROTO_VER_V1), destinationCID: destination,
            sourceCID: .random(length: 16), settings: settings, params: transport.ngtcp2TransportParameters(),
            qlogODCID: destination)
        let alpn = configuration.alpn
        let connection = try QUICConnection(
            setup: setup, transport: transport, staticSecret: staticSecret, verification: configuration.verification,
            serverName: serverName
        ) { connection, connRef in
            try QUICConnection.makeClientSession(
                connection: connection, connRef: connRef, credentials: credentials, alpn: alpn, serverName: serverName,
                resumeWith: usableTicket)
        }
        connection.tlsResources = credentials
        connection.offeredALPNForErrors = alpn
        connection.currentTime = now
        if let usableTicket { connection.installEarlyTransportParameters(usableTicket.transportParameters) }
        return connection
    }
}
