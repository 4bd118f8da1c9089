import CBraid

/// What TLS's and DTLS's engines set up alike on a GnuTLS session: the context's priorities
/// and credentials, SNI, ALPN, the request for a client certificate, and the certificate check
/// the verify callback runs. Each engine adds its own transport (a byte stream in memory, or
/// whole datagrams) and the callbacks only it has.
enum TLSSessionSetup {
    /// Attaches a context's parsed priorities and its certificate credentials.
    static func attach(priority: TLSPriority, credentials: TLSCredentials, to session: gnutls_session_t) throws(TLSError) {
        var rc = priority.set(on: session)
        guard rc == 0 else { throw .internalError(function: "gnutls_priority_set", code: rc) }
        rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.handle))
        guard rc == 0 else { throw .internalError(function: "gnutls_credentials_set", code: rc) }
    }

    /// Client: sends `serverName` as SNI, unless it is empty or an IP literal (RFC 6066 §3).
    static func requestServerName(_ serverName: String, on session: gnutls_session_t) throws(TLSError) {
        guard !serverName.isEmpty && !isIPLiteral(serverName) else { return }
        let rc = gnutls_server_name_set(session, GNUTLS_NAME_DNS, serverName, serverName.utf8.count)
        guard rc == 0 else { throw .configuration("server name \(serverName): \(gnutlsErrorString(rc))") }
    }

    /// A client offers `protocols`; a server accepts them, preferring its own order. Mandatory
    /// both ways: a server answering with a protocol the client did not offer fails the
    /// handshake, and so does a client offering none the server serves. Empty: no ALPN.
    static func setALPN(_ protocols: [String], role: TLSConnection.Role, on session: gnutls_session_t) throws(TLSError) {
        guard !protocols.isEmpty else { return }
        let flags = role == .client ? GNUTLS_ALPN_MANDATORY.rawValue : GNUTLS_ALPN_MANDATORY.rawValue | GNUTLS_ALPN_SERVER_PRECEDENCE.rawValue
        let rc = withALPNDatums(protocols) { gnutls_alpn_set_protocols(session, $0, UInt32($1), flags) }
        guard rc == 0 else { throw .configuration("ALPN \(protocols): \(gnutlsErrorString(rc))") }
    }

    /// Server: asks for a client certificate as `mode` says. True when one may come, so the
    /// verify callback must be installed.
    static func requestClientCertificate(_ mode: TLSPeerAuthentication, on session: gnutls_session_t) -> Bool {
        switch mode {
        case .none: return false
        case .optional: gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST)
        case .required: gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE)
        }
        return true
    }

    /// The verify callback's check: a client checks the server's chain, name and pins (unless
    /// the caller judges it after the handshake); a server checks a presented client
    /// certificate against its client CAs (or leaves it to the caller). Nil accepts.
    static func certificateProblem(
        of session: gnutls_session_t, client: TLSClientConfiguration?, server: TLSServerConfiguration?, serverName: String
    ) -> CertificateProblem? {
        if let client {
            if client.callerVerifiesPeer { return nil }
            return verifyPeerCertificate(of: session, verification: client.verification, hostname: serverName)
        }
        guard let server else { return .invalid("no configuration to check the peer against") }
        return verifyClientCertificate(of: session, configuration: server)
    }

    /// The peer's certificate chain, leaf first, DER-encoded (empty: none presented).
    static func peerCertificateChain(of session: gnutls_session_t) -> [[UInt8]] {
        var count: UInt32 = 0
        guard let chain = gnutls_certificate_get_peers(session, &count) else { return [] }
        return (0..<Int(count)).map { Array(UnsafeBufferPointer(start: chain[$0].data, count: Int(chain[$0].size))) }
    }
}
