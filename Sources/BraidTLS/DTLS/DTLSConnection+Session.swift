import CBraid
import Glibc

/// The GnuTLS session: datagram transport, priorities, SNI, ALPN and certificate checks.
extension DTLSConnection {
    func configureSession(mtu: Int) throws(TLSError) {
        let priority = clientContext?.priority ?? serverContext!.priority
        var rc = priority.set(on: session)
        guard rc == 0 else { throw .internalError(function: "gnutls_priority_set", code: rc) }
        let credentials = clientContext?.credentials ?? serverContext!.credentials
        rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.handle))
        guard rc == 0 else { throw .internalError(function: "gnutls_credentials_set", code: rc) }
        self.mtu = mtu
        installDatagramTransport()
        if role == .client { try configureClient() } else { try configureServer() }
    }

    /// GnuTLS pulls whole datagrams from `inbox` and pushes whole datagrams into `outbox`.
    private func installDatagramTransport() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        gnutls_transport_set_ptr(session, me)
        gnutls_session_set_ptr(session, me)
        gnutls_transport_set_pull_function(session) { pointer, destination, count in
            let connection = DTLSConnection.from(pointer)
            guard !connection.inbox.isEmpty else {
                gnutls_transport_set_errno(connection.session, EAGAIN)
                return -1
            }
            let datagram = connection.inbox.removeFirst()
            // A datagram larger than GnuTLS's buffer is cut, as recv cuts it.
            let n = min(datagram.count, count)
            datagram.withUnsafeBytes { destination!.copyMemory(from: $0.baseAddress!, byteCount: n) }
            return n
        }
        // GnuTLS asks (with a zero wait, being nonblocking) whether a datagram is there; the
        // default would poll a file descriptor.
        gnutls_transport_set_pull_timeout_function(session) { pointer, _ in
            DTLSConnection.from(pointer).inbox.isEmpty ? 0 : 1
        }
        gnutls_transport_set_push_function(session) { pointer, data, count in
            let connection = DTLSConnection.from(pointer)
            // A full outbox loses the datagram, as a full socket buffer would; GnuTLS
            // retransmits handshake flights, and `send` refuses before this happens.
            if connection.outbox.count < DTLSConnection.outboxLimit {
                connection.outbox.append(Array(UnsafeRawBufferPointer(start: data, count: count)))
            }
            return count
        }
    }

    private func configureClient() throws(TLSError) {
        let configuration = clientContext!.configuration
        var rc: Int32
        if !serverName.isEmpty && !isIPLiteral(serverName) {
            rc = gnutls_server_name_set(session, GNUTLS_NAME_DNS, serverName, serverName.utf8.count)
            guard rc == 0 else { throw .configuration("server name \(serverName): \(gnutlsErrorString(rc))") }
        }
        if !configuration.alpn.isEmpty {
            rc = withALPNDatums(configuration.alpn) {
                gnutls_alpn_set_protocols(session, $0, UInt32($1), GNUTLS_ALPN_MANDATORY.rawValue)
            }
            guard rc == 0 else { throw .configuration("ALPN \(configuration.alpn): \(gnutlsErrorString(rc))") }
        }
        gnutls_session_set_verify_function(session) { session in
            DTLSConnection.from(gnutls_session_get_ptr(session)).verifyPeer()
        }
    }

    private func configureServer() throws(TLSError) {
        let configuration = serverContext!.configuration
        if !configuration.alpn.isEmpty {
            let rc = withALPNDatums(configuration.alpn) {
                gnutls_alpn_set_protocols(
                    session, $0, UInt32($1), GNUTLS_ALPN_MANDATORY.rawValue | GNUTLS_ALPN_SERVER_PRECEDENCE.rawValue)
            }
            guard rc == 0 else { throw .configuration("ALPN \(configuration.alpn): \(gnutlsErrorString(rc))") }
        }
        switch configuration.peerAuthentication {
        case .none: break
        case .optional: gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST)
        case .required: gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE)
        }
        if configuration.peerAuthentication != .none {
            gnutls_session_set_verify_function(session) { session in
                DTLSConnection.from(gnutls_session_get_ptr(session)).verifyPeer()
            }
        }
        gnutls_handshake_set_hook_function(session, GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue, GNUTLS_HOOK_PRE) {
            session, _, _, _, message in
            if let message { DTLSConnection.from(gnutls_session_get_ptr(session)).inspect(clientHello: message.pointee) }
            return 0
        }
    }

    /// Remembers the ALPN list a ClientHello offers, to name a mismatch precisely.
    private func inspect(clientHello: gnutls_datum_t) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var hello = clientHello
        _ = gnutls_ext_raw_parse(me, { context, type, data, size in
            guard let data, type == 16 else { return 0 }
            DTLSConnection.from(context).clientOfferedALPN = alpnProtocols(inExtension: UnsafeBufferPointer(start: data, count: Int(size)))
            return 0
        }, &hello, UInt32(GNUTLS_EXT_RAW_FLAG_DTLS_CLIENT_HELLO))
    }

    /// Runs inside GnuTLS's verify callback: 0 accepts, GNUTLS_E_CERTIFICATE_ERROR rejects.
    func verifyPeer() -> Int32 {
        if let problem = peerCertificateProblem() {
            certificateProblem = problem
            return GNUTLS_E_CERTIFICATE_ERROR
        }
        return 0
    }

    /// The same checks as TLS: a client checks the server's chain, name and pins; a server
    /// checks a presented client certificate against its client CAs.
    private func peerCertificateProblem() -> CertificateProblem? {
        if let clientContext {
            if clientContext.configuration.callerVerifiesPeer { return nil }
            return verifyPeerCertificate(of: session, verification: clientContext.configuration.verification, hostname: serverName)
        }
        return verifyClientCertificate(of: session, configuration: serverContext!.configuration)
    }
}
