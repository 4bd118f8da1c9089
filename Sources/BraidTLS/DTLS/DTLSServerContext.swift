import CBraid

/// Shared, immutable DTLS server state built once from a `TLSServerConfiguration`: credentials
/// (with the client CAs), the parsed DTLS 1.2 priorities, and the secret that makes and checks
/// hello cookies (generated here, so a cookie is good only on this context). Share it between
/// connections and threads.
///
/// Every new client goes through the cookie exchange first (`checkCookie(in:from:)`): a
/// ClientHello from a spoofed address gets a small HelloVerifyRequest back and costs no state.
public final class DTLSServerContext: Sendable {
    public let configuration: TLSServerConfiguration
    let credentials: TLSCredentials
    let priority: TLSPriority
    /// The cookie secret (`GNUTLS_COOKIE_KEY_SIZE` random bytes).
    let cookieKey: [UInt8]

    /// Validates the configuration and loads the credentials; throws `TLSError.configuration`.
    /// Ticket and 0-RTT settings are ignored: DTLS sessions are not resumed.
    public init(configuration: TLSServerConfiguration) throws(TLSError) {
        try validateALPN(configuration.alpn)
        if configuration.peerAuthentication == .none, configuration.clientCertificateAuthorityFile != nil {
            throw .configuration("clientCertificateAuthorityFile is set but peerAuthentication is .none")
        }
        try configuration.validateCallerVerification(resumes: false)
        priority = try TLSPriority(dtlsPriority)
        self.configuration = configuration
        credentials = try TLSCredentials.server(
            certificateChainFile: configuration.certificateChainFile, privateKeyFile: configuration.privateKeyFile,
            identity: configuration.identityMaterial,
            clientTrust: configuration.clientCertificateAuthorityFile.map { .certificateAuthorityFile($0) })
        var key = [UInt8](repeating: 0, count: Int(GNUTLS_COOKIE_KEY_SIZE))
        let rc = gnutls_rnd(GNUTLS_RND_KEY, &key, key.count)
        guard rc == 0 else { throw .internalError(function: "gnutls_rnd", code: rc) }
        cookieKey = key
    }

    /// Checks a datagram from a client we hold no connection for. A ClientHello carrying a valid
    /// cookie for `clientAddress` (the source address's bytes, e.g. `SocketAddress` storage) is
    /// `.verified`: create `DTLSConnection.server(context:cookie:)` and give it this datagram.
    /// A ClientHello without one gets `.reply` (a HelloVerifyRequest to send back to that
    /// address, smaller than the hello, so the server amplifies nothing); anything else is
    /// `.drop`. Stateless: nothing is kept either way.
    public func checkCookie(in datagram: UnsafeRawBufferPointer, from clientAddress: [UInt8]) -> DTLSCookieCheck {
        guard let base = datagram.baseAddress, !datagram.isEmpty else { return .drop }
        var key = cookieKey
        var address = clientAddress
        var prestate = gnutls_dtls_prestate_st()
        let rc = key.withUnsafeMutableBytes { keyBytes in
            address.withUnsafeMutableBytes { addressBytes in
                var datum = gnutls_datum_t(data: keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: UInt32(keyBytes.count))
                return gnutls_dtls_cookie_verify(
                    &datum, addressBytes.baseAddress, addressBytes.count, UnsafeMutableRawPointer(mutating: base), datagram.count,
                    &prestate)
            }
        }
        if rc == 0 { return .verified(DTLSCookieCheck.Verified(prestate)) }
        guard rc == GNUTLS_E_BAD_COOKIE else { return .drop }
        var reply: [UInt8] = []
        let sent = key.withUnsafeMutableBytes { keyBytes in
            address.withUnsafeMutableBytes { addressBytes in
                withUnsafeMutablePointer(to: &reply) { replyPointer in
                    var datum = gnutls_datum_t(data: keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: UInt32(keyBytes.count))
                    return gnutls_dtls_cookie_send(
                        &datum, addressBytes.baseAddress, addressBytes.count, &prestate, replyPointer
                    ) { pointer, data, size in
                        let reply = pointer!.assumingMemoryBound(to: [UInt8].self)
                        reply.pointee.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size))
                        return size
                    }
                }
            }
        }
        return sent >= 0 && !reply.isEmpty ? .reply(reply) : .drop
    }
}
