import CBraid
import Glibc

/// The GnuTLS session: datagram transport, priorities, SNI, ALPN and certificate checks.
extension DTLSConnection {
    func configureSession(mtu: Int) throws(TLSError) {
        try TLSSessionSetup.attach(
            priority: clientContext?.priority ?? serverContext!.priority, credentials: clientContext?.credentials ?? serverContext!.credentials,
            to: session)
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
        try TLSSessionSetup.requestServerName(serverName, on: session)
        try TLSSessionSetup.setALPN(clientContext!.configuration.alpn, role: .client, on: session)
        gnutls_session_set_verify_function(session) { session in
            DTLSConnection.from(gnutls_session_get_ptr(session)).verifyPeer()
        }
    }

    private func configureServer() throws(TLSError) {
        let configuration = serverContext!.configuration
        try TLSSessionSetup.setALPN(configuration.alpn, role: .server, on: session)
        if TLSSessionSetup.requestClientCertificate(configuration.peerAuthentication, on: session) {
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
    /// The same checks as TLS's (`TLSSessionSetup.certificateProblem`).
    func verifyPeer() -> Int32 {
        let problem = TLSSessionSetup.certificateProblem(
            of: session, client: clientContext?.configuration, server: serverContext?.configuration, serverName: serverName)
        guard let problem else { return 0 }
        certificateProblem = problem
        return GNUTLS_E_CERTIFICATE_ERROR
    }
}
