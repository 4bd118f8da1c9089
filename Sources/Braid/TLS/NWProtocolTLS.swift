import BraidCore

/// TLS in the classic API's stacks: `NWProtocolTLS.Options`, whose `securityProtocolOptions`
/// the `sec_protocol_options_*` functions configure.
///
/// ```swift
/// let tls = NWProtocolTLS.Options()
/// sec_protocol_options_set_min_tls_protocol_version(tls.securityProtocolOptions, .TLSv13)
/// sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "h2")
/// let parameters = NWParameters(tls: tls)
/// ```
///
/// The server's certificate is verified against the system store and the name connected to.
public enum NWProtocolTLS {
    /// TLS options: the security options below, over TCP.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        /// What `sec_protocol_options_*` set.
        public let securityProtocolOptions: sec_protocol_options_t

        override public init() {
            securityProtocolOptions = sec_protocol_options_t()
        }

        private init(copying options: sec_protocol_options_t) {
            securityProtocolOptions = options.copy()
        }

        override func copy() -> NWProtocolOptions { Options(copying: securityProtocolOptions) }

        override func stack(over lower: any StackBinding) throws -> any StackBinding {
            try stack(over: lower, parameters: NWParameters())
        }

        /// Connections resume sessions through one cache for the process, as Apple's system
        /// does; with `allowFastOpen` a resumed connection sends idempotent content as early data.
        override func stack(over lower: any StackBinding, parameters: NWParameters) throws -> any StackBinding {
            guard let tcp = lower as? TCP else {
                throw NetworkError.unsupported("TLS over \(type(of: lower)) (TLS runs over TCP; over UDP it is DTLS)")
            }
            let values = securityProtocolOptions.values
            var tls = TLS { tcp }.alpn(values.applicationProtocols).minimumVersion(values.minimumVersion)
                .maximumVersion(values.maximumVersion).earlyDataEnabled(parameters.allowFastOpen)
            if let name = values.serverName { tls = tls.serverName(name) }
            if let roots = values.trustRoots { tls = tls.trust(roots) }
            if values.resumptionEnabled { tls = tls.sessionCache(values.sessionCache ?? NWProtocolTLS.sessionCache) }
            return tls
        }
    }

    /// The session tickets of the process's classic TLS connections.
    static let sessionCache = TLS.SessionCache()
}

/// The security options of a classic-API TLS stack (Apple's `sec_protocol_options_t`), set
/// through the `sec_protocol_options_*` functions.
public final class sec_protocol_options: Sendable {
    struct Values: Sendable {
        var minimumVersion: TLSProtocolVersion = .TLSv12
        var maximumVersion: TLSProtocolVersion = .TLSv13
        var applicationProtocols: [String] = []
        var serverName: String?
        /// The authorities the server's certificate must lead to (nil: the system store).
        /// Not Apple's API: tests set it; applications will set trust with a verify block.
        var trustRoots: TLS.TrustRoots?
        /// Whether connections resume earlier sessions (`sec_protocol_options_set_tls_resumption_enabled`).
        var resumptionEnabled = true
        /// Where tickets are kept (nil: the process's cache). Not Apple's API: tests set it.
        var sessionCache: TLS.SessionCache?
        /// The PEM certificate chain and key a QUIC listener presents. Not Apple's API (its
        /// `sec_protocol_options_set_local_identity` takes a `sec_identity_t`): tests set it.
        var identityFiles: (certificateChain: String, privateKey: String)?
    }
    private let storage = Locked(Values())

    init() {}

    var values: Values { storage.withLock { $0 } }

    func update(_ change: (inout Values) -> Void) { storage.withLock { change(&$0) } }

    func copy() -> sec_protocol_options {
        let copied = sec_protocol_options()
        let values = values
        copied.storage.withLock { $0 = values }
        return copied
    }
}

/// Apple's name for the security options.
public typealias sec_protocol_options_t = sec_protocol_options

/// The lowest TLS version the connection accepts (default TLS 1.2).
public func sec_protocol_options_set_min_tls_protocol_version(_ options: sec_protocol_options_t, _ version: tls_protocol_version_t) {
    options.update { $0.minimumVersion = version }
}

/// The highest TLS version the connection offers (default TLS 1.3).
public func sec_protocol_options_set_max_tls_protocol_version(_ options: sec_protocol_options_t, _ version: tls_protocol_version_t) {
    options.update { $0.maximumVersion = version }
}

/// Offers (client) or accepts (server) one more application protocol (ALPN), after those
/// already added.
public func sec_protocol_options_add_tls_application_protocol(_ options: sec_protocol_options_t, _ applicationProtocol: UnsafePointer<CChar>) {
    let name = String(cString: applicationProtocol)
    options.update { $0.applicationProtocols.append(name) }
}

/// The name sent in SNI and checked against the server's certificate (default: the host
/// connected to).
public func sec_protocol_options_set_tls_server_name(_ options: sec_protocol_options_t, _ serverName: UnsafePointer<CChar>) {
    let name = String(cString: serverName)
    options.update { $0.serverName = name }
}

/// Whether connections resume earlier sessions with the tickets the process keeps (default
/// true; needed for early data, see `NWConnection.SendCompletion.idempotent`).
public func sec_protocol_options_set_tls_resumption_enabled(_ options: sec_protocol_options_t, _ resumptionEnabled: Bool) {
    options.update { $0.resumptionEnabled = resumptionEnabled }
}
