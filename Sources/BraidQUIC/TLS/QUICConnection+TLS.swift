import BraidTLS
import CBraid
import Logging

/// TLS: the client's GnuTLS session, certificate checks, the handshake's outcome, session
/// tickets and tokens for resumption, 0-RTT parameters, and key updates.
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
        var rc = gnutls_init(
            &created, GNUTLS_CLIENT.rawValue | GNUTLS_ENABLE_EARLY_DATA.rawValue | GNUTLS_NO_END_OF_EARLY_DATA.rawValue | TLSKeyExchange.clientSessionFlags)
        guard rc == 0, let session = created else { throw QUICError.tls("gnutls_init: \(gnutlsErrorString(rc))") }
        do {
            rc = setQUICPriority(on: session)
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
                session, UInt32(GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue), GNUTLS_HOOK_BOTH
            ) { session, _, when, _, message in
                guard let connection = QUICConnection.from(session: session) else { return 0 }
                if when == GNUTLS_HOOK_POST {
                    connection.captureSessionTicket()
                } else if let message, let data = message.pointee.data {
                    // Noted before GnuTLS stamps its own arrival time, so never younger than its view.
                    connection.arrivingTicketValidity = TLSTicketValidity(
                        newSessionTicket: UnsafeBufferPointer(start: data, count: Int(message.pointee.size)))
                }
                return 0
            }
            // A stale ticket never gets here (`QUICClientContext.connect`): GnuTLS would fail the
            // handshake on it rather than fall back (see `TLSTicketValidity`).
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
        guard let verification, let session else { return nil }
        return BraidTLS.verifyPeerCertificate(of: session, verification: verification, hostname: serverName)
    }

    /// The server's NewSessionTicket arrived: package it with the transport parameters.
    func captureSessionTicket() {
        var data = gnutls_datum_t()
        guard let session, gnutls_session_get_data2(session, &data) == 0, let bytes = data.data else { return }
        defer { braid_gnutls_free(bytes) }
        guard let params = ngtcp2_conn_get_remote_transport_params(conn)?.pointee, let validity = arrivingTicketValidity else { return }
        latestTicket = QUICResumptionTicket(
            serverName: serverName, alpn: negotiatedALPN ?? "",
            tlsSessionData: Array(UnsafeBufferPointer(start: bytes, count: Int(data.size))),
            transportParameters: RememberedTransportParameters(params), token: receivedToken, validity: validity)
        emit(.resumptionTicket(latestTicket!))
    }

    /// A NEW_TOKEN arrived after the ticket: hand out the ticket again with the token in it.
    func refreshTicket() {
        guard var ticket = latestTicket else { return }
        ticket.token = receivedToken
        latestTicket = ticket
        emit(.resumptionTicket(ticket))
    }

    /// Runs inside `read_pkt` when TLS finished: record ALPN and 0-RTT outcome, and on the
    /// server send the session ticket and a NEW_TOKEN.
    func handshakeCompleted() -> Int32 {
        negotiatedALPN = BraidTLS.negotiatedALPN(session)
        isResumed = session.map { gnutls_session_is_resumed($0) != 0 } ?? false
        if role == .client {
            if attemptedEarlyData {
                earlyDataAccepted = gnutls_session_get_flags(session) & GNUTLS_SFLAGS_EARLY_DATA.rawValue != 0
                if !earlyDataAccepted && ngtcp2_conn_get_early_data_rejected(conn) == 0 {
                    // GnuTLS tells us only here; ngtcp2 then drops 0-RTT streams, which we reopen.
                    if ngtcp2_conn_early_data_rejected(conn) != 0 { return NGTCP2_ERR_CALLBACK_FAILURE }
                }
            }
        } else {
            guard negotiatedALPN != nil else {
                // A client that sent no ALPN at all; RFC 9001 §8.1 requires it.
                ngtcp2_conn_set_tls_alert(conn, 120)
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            if gnutls_session_ticket_send(session, 1, 0) != 0 {
                logger.warning("could not send a session ticket")
            }
            let remote = path.remote
            if let token = makeNewToken?(remote, currentTime), !token.isEmpty {
                token.withUnsafeBufferPointer { _ = ngtcp2_conn_submit_new_token(conn, $0.baseAddress, $0.count) }
            }
        }
        phase = .established
        handshakeCompletedTime = currentTime
        emit(.handshakeCompleted)
        // The endpoint stops counting it as a half-open handshake.
        recordRoutingChange(.handshakeCompleted)
        return 0
    }

    /// Frees the GnuTLS session (about 10 KiB: the session and what the handshake left in it)
    /// once nothing needs it: ngtcp2 keeps the packet keys itself, key updates derive from
    /// them, and its copy of our crypto data serves retransmissions. A server's session is
    /// done when the handshake completes (its ticket went to ngtcp2 then; a client sends no TLS
    /// message after Finished). A client's waits for the confirmed handshake and the first
    /// ticket, so resumption works; later tickets are ignored (`recv_crypto_data`).
    func releaseTLSSessionWhenDone() {
        guard let session, isEstablished else { return }
        if role == .client, !handshakeConfirmed || latestTicket == nil { return }
        ngtcp2_conn_set_tls_native_handle(conn, nil)
        gnutls_deinit(session)
        self.session = nil
    }

    /// Remembered server parameters must be installed before the first packet (client only).
    func installEarlyTransportParameters(_ remembered: RememberedTransportParameters) {
        var params = ngtcp2_transport_params()
        braid_ngtcp2_transport_params_default(&params)
        remembered.apply(to: &params)
        braid_ngtcp2_conn_set_early_remote_transport_params(conn, &params)
        attemptedEarlyData = true
    }

    /// Starts a TLS key update (RFC 9001 §6). Needs a confirmed handshake; ngtcp2 limits the rate.
    package func initiateKeyUpdate(now: QUICInstant) throws {
        try ensureOpen()
        guard handshakeConfirmed else { throw QUICError.invalidState("key update needs a confirmed handshake") }
        let rc = ngtcp2_conn_initiate_key_update(conn, now.nanoseconds)
        if rc != 0 { throw QUICError.internalError(code: rc, function: "ngtcp2_conn_initiate_key_update") }
    }
}
