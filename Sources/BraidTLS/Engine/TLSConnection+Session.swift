import BraidCore
import CBraid
import Glibc

/// The GnuTLS session: memory transport, priorities, SNI, ALPN, certificate checks, tickets,
/// early data and client-certificate requests.
extension TLSConnection {
    func configureSession() throws(TLSError) {
        // The context's parsed priorities, shared (see `TLSPriority` for why that is safe).
        try TLSSessionSetup.attach(
            priority: clientContext?.priority ?? serverContext!.priority, credentials: clientContext?.credentials ?? serverContext!.credentials,
            to: session)
        // GNUTLS_INDEFINITE_TIMEOUT ((unsigned)-2, a macro Swift cannot import): the driver owns
        // handshake timeouts; GnuTLS must not fail a slow handshake on its own clock.
        gnutls_handshake_set_timeout(session, UInt32.max - 1)
        installMemoryTransport()
        if role == .client { try configureClient() } else { try configureServer() }
    }

    /// GnuTLS pulls from `input` and pushes into `output`; nothing blocks, nothing touches a socket.
    private func installMemoryTransport() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        gnutls_transport_set_ptr(session, me)
        gnutls_session_set_ptr(session, me)
        gnutls_transport_set_pull_function(session) { pointer, destination, count in
            let connection = TLSConnection.from(pointer)
            let n = connection.input.read(into: destination!, count: count)
            if n > 0 || connection.inputEnded { return n }
            gnutls_transport_set_errno(connection.session, EAGAIN)
            return -1
        }
        gnutls_transport_set_vec_push_function(session) { pointer, vectors, count in
            let connection = TLSConnection.from(pointer)
            var total = 0
            for index in 0..<Int(count) {
                let vector = vectors![index]
                connection.output.append(vector.iov_base, count: vector.iov_len)
                total += vector.iov_len
            }
            return total
        }
    }

    private func configureClient() throws(TLSError) {
        try TLSSessionSetup.requestServerName(serverName, on: session)
        try TLSSessionSetup.setALPN(clientContext!.configuration.alpn, role: .client, on: session)
        gnutls_session_set_verify_function(session) { session in
            TLSConnection.from(gnutls_session_get_ptr(session)).verifyPeer()
        }
        // Before GnuTLS parses a NewSessionTicket (it consumes the message), read its early-data
        // limit; after, note the ticket is there to export.
        gnutls_handshake_set_hook_function(
            session, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET.rawValue, GNUTLS_HOOK_BOTH
        ) { session, _, when, _, message in
            let connection = TLSConnection.from(gnutls_session_get_ptr(session))
            if when == GNUTLS_HOOK_POST {
                connection.ticketArrived = true
            } else if let message {
                connection.ticketMaxEarlyData = maxEarlyDataSize(inNewSessionTicket: message.pointee)
                // Noted before GnuTLS stamps its own arrival time, so never younger than its view.
                connection.ticketValidity = message.pointee.data.flatMap {
                    TLSTicketValidity(newSessionTicket: UnsafeBufferPointer(start: $0, count: Int(message.pointee.size)))
                }
            }
            return 0
        }
        if let resumption {
            // An unusable ticket (a rotated key, corrupt) only means a full handshake; a stale one
            // never gets here (`TLSConnection.client`).
            _ = resumption.sessionData.withUnsafeBytes { gnutls_session_set_data(session, $0.baseAddress, $0.count) }
        }
    }

    private func configureServer() throws(TLSError) {
        let context = serverContext!
        let configuration = context.configuration
        var rc: Int32
        try TLSSessionSetup.setALPN(configuration.alpn, role: .server, on: session)
        if let ticketKey = context.ticketKeyRing?.current.ticketKey ?? context.ticketKey {
            rc = gnutls_session_ticket_enable_server(session, ticketKey.datum)
            guard rc == 0 else { throw .internalError(function: "gnutls_session_ticket_enable_server", code: rc) }
            if let lifetime = configuration.ticketLifetime {
                gnutls_db_set_cache_expiration(session, Int32(clamping: lifetime))
            }
        }
        if let antiReplay = context.antiReplay {
            gnutls_anti_replay_enable(session, antiReplay.handle)
            rc = gnutls_record_set_max_early_data_size(session, configuration.maxEarlyDataSize)
            guard rc == 0 else { throw .internalError(function: "gnutls_record_set_max_early_data_size", code: rc) }
        }
        if TLSSessionSetup.requestClientCertificate(configuration.peerAuthentication, on: session) {
            gnutls_session_set_verify_function(session) { session in
                TLSConnection.from(gnutls_session_get_ptr(session)).verifyPeer()
            }
        }
        gnutls_handshake_set_hook_function(session, GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue, GNUTLS_HOOK_BOTH) {
            session, _, when, _, message in
            let connection = TLSConnection.from(gnutls_session_get_ptr(session))
            if when == GNUTLS_HOOK_POST {
                connection.clientHelloProcessed = true
            } else if let message {
                connection.inspect(clientHello: message.pointee)
                // A resuming client's ticket may come from an older generation of the fleet's keys.
                if let ring = connection.serverContext?.ticketKeyRing, let data = message.pointee.data {
                    ring.selectTicketKey(
                        for: session!, clientHello: UnsafeRawBufferPointer(start: data, count: Int(message.pointee.size)), now: .now())
                }
            }
            return 0
        }
    }

    /// Runs inside GnuTLS's verify callback: 0 accepts, GNUTLS_E_CERTIFICATE_ERROR rejects.
    /// The client checks the server as QUIC does; a server checks a presented client
    /// certificate against its client CAs (`TLSSessionSetup.certificateProblem`).
    func verifyPeer() -> Int32 {
        let problem = TLSSessionSetup.certificateProblem(
            of: session, client: clientContext?.configuration, server: serverContext?.configuration, serverName: serverName)
        guard let problem else { return 0 }
        certificateProblem = problem
        return GNUTLS_E_CERTIFICATE_ERROR
    }

    /// Remembers what a ClientHello offers (ALPN, versions), to name a mismatch precisely.
    private func inspect(clientHello: gnutls_datum_t) {
        guard let body = clientHello.data, clientHello.size >= 2 else { return }
        // Without supported_versions (RFC 8446 §4.2.1) legacy_version is the client's highest.
        clientOfferedVersions = (Int(body[0]) << 8 | Int(body[1])) >= 0x0303 ? [.v1_2] : []
        let me = Unmanaged.passUnretained(self).toOpaque()
        var hello = clientHello
        _ = gnutls_ext_raw_parse(me, { context, type, data, size in
            guard let data else { return 0 }
            let connection = TLSConnection.from(context)
            let bytes = UnsafeBufferPointer(start: data, count: Int(size))
            if type == 16 {
                connection.clientOfferedALPN = alpnProtocols(inExtension: bytes)
            } else if type == 43, bytes.count >= 1 {
                var versions = Set<TLSVersion>()
                var index = 1
                while index + 1 < bytes.count && index <= Int(bytes[0]) {
                    switch Int(bytes[index]) << 8 | Int(bytes[index + 1]) {
                    case 0x0303: versions.insert(.v1_2)
                    case 0x0304: versions.insert(.v1_3)
                    default: break
                    }
                    index += 2
                }
                connection.clientOfferedVersions = versions
            }
            return 0
        }, &hello, UInt32(GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO))
    }
}

/// The max_early_data_size a TLS 1.3 NewSessionTicket grants (RFC 8446 §4.6.1), 0 if none.
/// GnuTLS's own client-side limit defaults to unlimited when the extension is absent.
func maxEarlyDataSize(inNewSessionTicket message: gnutls_datum_t) -> Int {
    guard let data = message.data else { return 0 }
    let bytes = UnsafeBufferPointer(start: data, count: Int(message.size))
    var index = 8  // ticket_lifetime, ticket_age_add
    func skip(lengthBytes: Int) -> Bool {
        guard index + lengthBytes <= bytes.count else { return false }
        var length = 0
        for _ in 0..<lengthBytes { length = length << 8 | Int(bytes[index]); index += 1 }
        index += length
        return index <= bytes.count
    }
    guard skip(lengthBytes: 1), skip(lengthBytes: 2), index + 2 <= bytes.count else { return 0 }
    let end = min(bytes.count, index + 2 + (Int(bytes[index]) << 8 | Int(bytes[index + 1])))
    index += 2
    while index + 4 <= end {
        let type = Int(bytes[index]) << 8 | Int(bytes[index + 1])
        let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
        index += 4
        if type == 42, length == 4, index + 4 <= end {
            return (0..<4).reduce(0) { $0 << 8 | Int(bytes[index + $1]) }
        }
        index += length
    }
    return 0
}
