import CBraid

extension QUICConnection {
    /// Recovers the connection from a GnuTLS session whose pointer is our `ngtcp2_crypto_conn_ref`.
    static func from(session: gnutls_session_t?) -> QUICConnection? {
        guard let session, let raw = gnutls_session_get_ptr(session) else { return nil }
        let ref = raw.assumingMemoryBound(to: ngtcp2_crypto_conn_ref.self)
        return Unmanaged<QUICConnection>.fromOpaque(ref.pointee.user_data).takeUnretainedValue()
    }

    /// Client TLS session: TLS 1.3 with early data, ALPN, SNI, our certificate checks, ticket capture.
    static func makeClientSession(
        connection: QUICConnection, connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>,
        credentials: TLSCredentials, alpn: [String], serverName: String, resumeWith ticket: QUICResumptionTicket?
    ) throws -> gnutls_session_t {
        var created: gnutls_session_t?
        var rc = gnutls_init(&created, GNUTLS_CLIENT.rawValue | GNUTLS_ENABLE_EARLY_DATA.rawValue | GNUTLS_NO_END_OF_EARLY_DATA.rawValue)
        guard rc == 0, let session = created else { throw QUICError.tls("gnutls_init: \(gnutlsErrorString(rc))") }
        do {
            rc = gnutls_priority_set_direct(session, quicPriority, nil)
            guard rc == 0 else { throw QUICError.tls("priority: \(gnutlsErrorString(rc))") }
            rc = ngtcp2_crypto_gnutls_configure_client_session(session)
            guard rc == 0 else { throw QUICError.tls("cannot configure the QUIC TLS session") }
            gnutls_session_set_ptr(session, connRef)
            rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.handle))
            guard rc == 0 else { throw QUICError.tls("credentials: \(gnutlsErrorString(rc))") }
            rc = withALPNDatums(alpn) { gnutls_alpn_set_protocols(session, $0, UInt32($1), UInt32(GNUTLS_ALPN_MANDATORY.rawValue)) }
            guard rc == 0 else { throw QUICError.configuration("ALPN \(alpn): \(gnutlsErrorString(rc))") }
            if !serverName.isEmpty && !isIPLiteral(serverName) {
                rc = gnutls_server_name_set(session, GNUTLS_NAME_DNS, serverName, serverName.utf8.count)
                guard rc == 0 else { throw QUICError.configuration("server name \(serverName): \(gnutlsErrorString(rc))") }
            }
            gnutls_session_set_verify_function(session) { session in
                guard let connection = QUICConnection.from(session: session) else { return GNUTLS_E_CERTIFICATE_ERROR }
                if let problem = connection.verifyPeerCertificate() {
                    connection.certificateProblem = problem
                    return GNUTLS_E_CERTIFICATE_ERROR
                }
                return 0
            }
            gnutls_handshake_set_hook_function(
                session, UInt32(GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue), GNUTLS_HOOK_POST
            ) { session, _, _, _, _ in
                QUICConnection.from(session: session)?.captureSessionTicket()
                return 0
            }
            if let ticket {
                rc = ticket.tlsSessionData.withUnsafeBytes { gnutls_session_set_data(session, $0.baseAddress, $0.count) }
                if rc != 0 { connection.logger.debug("ignoring unusable resumption ticket: \(gnutlsErrorString(rc))") }
            }
        } catch {
            gnutls_deinit(session)
            throw error
        }
        return session
    }

    /// Chain + hostname (unless explicitly disabled), then SPKI pins. Nil means accepted.
    func verifyPeerCertificate() -> CertificateProblem? {
        guard let verification else { return nil }
        var count: UInt32 = 0
        guard let chain = gnutls_certificate_get_peers(session, &count), count > 0 else { return .missing }
        if !verification.insecureSkipChainAndHostnameVerification {
            var status: UInt32 = 0
            let rc = gnutls_certificate_verify_peers3(session, serverName, &status)
            if rc < 0 { return .invalid(gnutlsErrorString(rc)) }
            if status != 0 { return BraidQUIC.certificateProblem(fromStatus: status, hostname: serverName) }
        }
        if !verification.pinnedSPKISHA256.isEmpty {
            guard let pin = spkiSHA256(ofCertificateDER: chain.pointee),
                verification.pinnedSPKISHA256.contains(pin)
            else { return .pinMismatch }
        }
        return nil
    }

    /// The server's NewSessionTicket arrived: package it with the transport parameters.
    func captureSessionTicket() {
        var data = gnutls_datum_t()
        guard gnutls_session_get_data2(session, &data) == 0, let bytes = data.data else { return }
        defer { braid_gnutls_free(bytes) }
        guard let params = ngtcp2_conn_get_remote_transport_params(conn)?.pointee else { return }
        latestTicket = QUICResumptionTicket(
            serverName: serverName, alpn: negotiatedALPN ?? "",
            tlsSessionData: Array(UnsafeBufferPointer(start: bytes, count: Int(data.size))),
            transportParameters: RememberedTransportParameters(params), token: receivedToken)
        emit(.resumptionTicket(latestTicket!))
    }

    /// A NEW_TOKEN arrived after the ticket: hand out the ticket again with the token in it.
    func refreshTicket() {
        guard var ticket = latestTicket else { return }
        ticket.token = receivedToken
        latestTicket = ticket
        emit(.resumptionTicket(ticket))
    }
}

/// Shared, immutable client state: TLS credentials (loading the system store is costly, so
/// build this once) and the secret behind our stateless-reset tokens.
///
/// ```swift
/// var configuration = QUICClientConfiguration(alpn: ["echo"])
/// configuration.verification = .init(trustRoots: .certificateAuthorityFile("ca.pem"))
/// let context = try QUICClientContext(configuration: configuration)
/// let connection = try context.connect(path: path, serverName: "localhost", now: now)
/// ```
public final class QUICClientContext: Sendable {
    public let configuration: QUICClientConfiguration
    let credentials: TLSCredentials
    let staticSecret: [UInt8]

    public init(configuration: QUICClientConfiguration) throws {
        guard !configuration.alpn.isEmpty else { throw QUICError.configuration("QUIC needs at least one ALPN") }
        for pin in configuration.verification.pinnedSPKISHA256 where pin.count != 32 {
            throw QUICError.configuration("SPKI pins are SHA-256 digests (32 bytes); got \(pin.count) bytes")
        }
        try validate(configuration.transport)
        self.configuration = configuration
        credentials = try TLSCredentials.client(
            trust: configuration.verification.trustRoots, certificateChainFile: configuration.certificateChainFile,
            privateKeyFile: configuration.privateKeyFile)
        var secret = [UInt8](repeating: 0, count: 32)
        fillRandom(&secret)
        staticSecret = secret
    }

    /// Starts a connection on `path`. `serverName` is sent as SNI (unless an IP literal) and is
    /// the name the certificate must carry. With a `ticket` for this server, the connection
    /// resumes and streams opened before the handshake completes travel as 0-RTT data.
    public func connect(
        path: QUICPath, serverName: String, resumption ticket: QUICResumptionTicket? = nil, now: QUICInstant
    ) throws -> QUICConnection {
        let transport = configuration.transport
        let usableTicket = ticket.flatMap { $0.serverName == serverName && configuration.alpn.contains($0.alpn) ? $0 : nil }
        var settings = makeSettings(transport, now: now)
        let token = usableTicket?.token ?? []
        let tokenStorage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(token.count, 1))
        defer { tokenStorage.deallocate() }
        _ = tokenStorage.initialize(from: token)
        if !token.isEmpty { settings.token = ngtcp2_vec(base: tokenStorage.baseAddress, len: token.count) }
        let destination = ConnectionID.random(length: 18)
        let setup = QUICConnection.Setup(
            role: .client, path: path, version: UInt32(NGTCP2_PROTO_VER_V1), destinationCID: destination,
            sourceCID: .random(length: 16), settings: settings, params: makeTransportParameters(transport),
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

func validate(_ transport: QUICTransportConfiguration) throws {
    guard (1200...65527).contains(transport.maxUDPPayloadSize) else {
        throw QUICError.configuration("maxUDPPayloadSize must be 1200...65527, got \(transport.maxUDPPayloadSize)")
    }
    guard (2...8).contains(transport.activeConnectionIDLimit) else {
        throw QUICError.configuration("activeConnectionIDLimit must be 2...8")
    }
    let limit: UInt64 = 1 << 62 - 1
    for value in [transport.initialMaxData, transport.initialMaxStreamDataBidirectionalLocal,
                  transport.initialMaxStreamDataBidirectionalRemote, transport.initialMaxStreamDataUnidirectional,
                  transport.initialMaxBidirectionalStreams, transport.initialMaxUnidirectionalStreams,
                  transport.maxConnectionWindow, transport.maxStreamWindow] where value > limit {
        throw QUICError.configuration("flow-control limits must be below 2^62")
    }
}

func makeSettings(_ transport: QUICTransportConfiguration, now: QUICInstant) -> ngtcp2_settings {
    var settings = ngtcp2_settings()
    braid_ngtcp2_settings_default(&settings)
    settings.initial_ts = now.nanoseconds
    settings.cc_algo = switch transport.congestionControl {
    case .reno: NGTCP2_CC_ALGO_RENO
    case .cubic: NGTCP2_CC_ALGO_CUBIC
    case .bbr: NGTCP2_CC_ALGO_BBR
    }
    settings.max_tx_udp_payload_size = transport.maxUDPPayloadSize
    settings.handshake_timeout = transport.handshakeTimeout.nanosecondsClamped
    settings.max_window = transport.maxConnectionWindow
    settings.max_stream_window = transport.maxStreamWindow
    settings.no_pmtud = transport.pathMTUDiscovery ? 0 : 1
    return settings
}

func makeTransportParameters(_ transport: QUICTransportConfiguration) -> ngtcp2_transport_params {
    var params = ngtcp2_transport_params()
    braid_ngtcp2_transport_params_default(&params)
    params.initial_max_data = transport.initialMaxData
    params.initial_max_stream_data_bidi_local = transport.initialMaxStreamDataBidirectionalLocal
    params.initial_max_stream_data_bidi_remote = transport.initialMaxStreamDataBidirectionalRemote
    params.initial_max_stream_data_uni = transport.initialMaxStreamDataUnidirectional
    params.initial_max_streams_bidi = transport.initialMaxBidirectionalStreams
    params.initial_max_streams_uni = transport.initialMaxUnidirectionalStreams
    params.max_idle_timeout = transport.idleTimeout.nanosecondsClamped
    params.active_connection_id_limit = transport.activeConnectionIDLimit
    params.max_datagram_frame_size = transport.maxDatagramFrameSize
    return params
}
