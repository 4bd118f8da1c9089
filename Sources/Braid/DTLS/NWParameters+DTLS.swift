import BraidTLS

extension NWParameters {
    /// DTLS (when `dtls` is not nil) over UDP. DTLS takes the same `NWProtocolTLS.Options`
    /// as TLS, set with the same `sec_protocol_options_*` functions.
    ///
    /// ```swift
    /// let tls = NWProtocolTLS.Options()
    /// sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "coap")
    /// let connection = NWConnection(host: "sensor.example", port: 5684, using: NWParameters(dtls: tls))
    /// ```
    public convenience init(dtls: NWProtocolTLS.Options?, udp: NWProtocolUDP.Options = NWProtocolUDP.Options()) {
        self.init(stack: ProtocolStack(application: dtls.map { [$0] } ?? [], transport: udp))
    }

    /// DTLS over UDP with default options.
    public static var dtls: NWParameters { NWParameters(dtls: NWProtocolTLS.Options()) }
}

extension NWProtocolTLS.Options {
    /// The DTLS stack these options describe over `udp`: the same ALPN, server name and trust
    /// as TLS's. What DTLS under Braid cannot honour is refused rather than dropped.
    func dtls(over udp: UDP) throws -> DTLS {
        let values = securityProtocolOptions.values
        if values.minimumVersion == .TLSv13 {
            throw NetworkError.unsupported("a minimum version of TLS 1.3 over UDP (DTLS 1.3): GnuTLS 3.7 speaks DTLS 1.2 only")
        }
        if !values.cipherSuites.isEmpty { throw NetworkError.unsupported("cipher suites on DTLS options") }
        if values.verifyBlock != nil { throw NetworkError.unsupported("a verify block on DTLS options") }
        if values.localIdentity != nil { throw NetworkError.unsupported("a local identity on DTLS options (DTLS listeners and client certificates)") }
        var dtls = DTLS { udp }.alpn(values.applicationProtocols)
        if let name = values.serverName { dtls = dtls.serverName(name) }
        if let roots = values.trustRoots { dtls = dtls.trust(roots) }
        return dtls
    }
}

extension DTLS: ClassicBinding {
    static func transfer(over connection: NetworkConnection<DTLS>) -> any ClassicTransfer { DatagramClassicTransfer(connection) }
}
