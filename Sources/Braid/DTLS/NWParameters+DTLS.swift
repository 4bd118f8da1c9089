import BraidTLS

extension NWParameters {
    /// DTLS (when `dtls` is not nil) over UDP. DTLS takes the same `NWProtocolTLS.Options`
    /// as TLS, set with the same `sec_protocol_options_*` functions: ALPN, the server name, a
    /// local identity (a listener's, or a client's for listeners that ask) and a client's verify
    /// block. A classic DTLS listener, like a classic TLS one, asks clients for no certificate.
    ///
    /// ```swift
    /// let tls = NWProtocolTLS.Options()
    /// sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "coap")
    /// let connection = NWConnection(host: "sensor.example", port: 5684, using: NWParameters(dtls: tls))
    /// ```
    ///
    /// A listener presents an identity imported with `SecPKCS12Import`:
    ///
    /// ```swift
    /// func sensorListener(identity: SecIdentity) throws -> NWListener {
    ///     let dtls = NWProtocolTLS.Options()
    ///     sec_protocol_options_set_local_identity(dtls.securityProtocolOptions, sec_identity_create(identity)!)
    ///     return try NWListener(using: NWParameters(dtls: dtls), on: 5684)
    /// }
    /// ```
    public convenience init(dtls: NWProtocolTLS.Options?, udp: NWProtocolUDP.Options = NWProtocolUDP.Options()) {
        self.init(stack: ProtocolStack(application: dtls.map { [$0] } ?? [], transport: udp))
    }

    /// DTLS over UDP with default options.
    public static var dtls: NWParameters { NWParameters(dtls: NWProtocolTLS.Options()) }
}

extension NWProtocolTLS.Options {
    /// The DTLS stack these options describe over `udp`: the same ALPN, server name, trust,
    /// local identity and verify block as TLS's. What DTLS under Braid cannot honour is
    /// refused rather than dropped.
    func dtls(over udp: UDP) throws -> DTLS {
        let values = securityProtocolOptions.values
        if values.minimumVersion == .TLSv13 {
            throw NetworkError.unsupported("a minimum version of TLS 1.3 over UDP (DTLS 1.3): GnuTLS 3.7 speaks DTLS 1.2 only")
        }
        if values.maximumVersion == .DTLSv10 {
            throw NetworkError.unsupported("a maximum version of DTLS 1.0: Braid's DTLS speaks DTLS 1.2 only")
        }
        if !values.cipherSuites.isEmpty { throw NetworkError.unsupported("cipher suites on DTLS options") }
        // Classic listeners do not ask for client certificates, as classic TLS listeners do not.
        var dtls = DTLS { udp }.alpn(values.applicationProtocols).peerAuthentication(.none)
        if let name = values.serverName { dtls = dtls.serverName(name) }
        if let roots = values.trustRoots { dtls = dtls.trust(roots) }
        if let identity = values.localIdentity {
            dtls = dtls.identity(TLSIdentityMaterial(certificates: identity.presentedChain, privateKey: identity.identity.privateKey))
        }
        if let verify = values.verifyBlock { dtls = dtls.verified(by: TLSPeerVerifier.calling(verify.block, on: verify.queue)) }
        return dtls
    }
}

extension DTLS: ClassicBinding {
    static func transfer(over connection: NetworkConnection<DTLS>) -> any ClassicTransfer { DatagramClassicTransfer(connection) }
}
