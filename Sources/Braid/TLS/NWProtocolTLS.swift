import BraidCore
import BraidSecurity
import BraidTLS
import Dispatch

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

        /// The lowest TLS version accepted; the same setting as
        /// `sec_protocol_options_set_min_tls_protocol_version`.
        public var minimumTLSProtocolVersion: tls_protocol_version_t {
            get { securityProtocolOptions.values.minimumVersion }
            set { sec_protocol_options_set_min_tls_protocol_version(securityProtocolOptions, newValue) }
        }

        /// The highest TLS version offered; the same setting as
        /// `sec_protocol_options_set_max_tls_protocol_version`.
        public var maximumTLSProtocolVersion: tls_protocol_version_t {
            get { securityProtocolOptions.values.maximumVersion }
            set { sec_protocol_options_set_max_tls_protocol_version(securityProtocolOptions, newValue) }
        }

        /// The cipher suites allowed (empty: the defaults); the same list
        /// `sec_protocol_options_append_tls_ciphersuite` appends to.
        public var tlsCipherSuites: [tls_ciphersuite_t] {
            get { securityProtocolOptions.values.cipherSuites }
            set { securityProtocolOptions.update { $0.cipherSuites = newValue } }
        }

        override func stack(over lower: any StackBinding) throws -> any StackBinding {
            try stack(over: lower, parameters: NWParameters())
        }

        /// Connections resume sessions through one cache for the process, as Apple's system
        /// does; with `allowFastOpen` a resumed connection sends idempotent content as early data.
        override func stack(over lower: any StackBinding, parameters: NWParameters) throws -> any StackBinding {
            if let udp = lower as? UDP { return try dtls(over: udp) }
            guard let tcp = lower as? TCP else {
                throw NetworkError.unsupported("TLS over \(type(of: lower)) (TLS runs over TCP, DTLS over UDP)")
            }
            let values = securityProtocolOptions.values
            var tls = TLS { tcp }.alpn(values.applicationProtocols).minimumVersion(values.minimumVersion)
                .maximumVersion(values.maximumVersion).earlyDataEnabled(parameters.allowFastOpen)
            if let name = values.serverName { tls = tls.serverName(name) }
            if let roots = values.trustRoots { tls = tls.trust(roots) }
            if values.resumptionEnabled { tls = tls.sessionCache(values.sessionCache ?? NWProtocolTLS.sessionCache) }
            if !values.cipherSuites.isEmpty { tls = tls.cipherSuites(values.cipherSuites) }
            if let identity = values.localIdentity {
                tls = tls.identity(TLSIdentityMaterial(certificates: identity.presentedChain, privateKey: identity.identity.privateKey))
            }
            if let verify = values.verifyBlock { tls = tls.verified(by: TLSPeerVerifier.calling(verify.block, on: verify.queue)) }
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
        /// `sec_protocol_options_append_tls_ciphersuite`'s suites, in order (empty: defaults).
        var cipherSuites: [tls_ciphersuite_t] = []
        /// What this end presents (`sec_protocol_options_set_local_identity`).
        var localIdentity: sec_identity_t?
        /// `sec_protocol_options_set_verify_block`'s block and its queue.
        var verifyBlock: (block: sec_protocol_verify_t, queue: DispatchQueue)?
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

/// Allows one more cipher suite (the first call replaces the defaults with it). See
/// `TLS.cipherSuites(_:)` for how GnuTLS applies the list.
public func sec_protocol_options_append_tls_ciphersuite(_ options: sec_protocol_options_t, _ ciphersuite: tls_ciphersuite_t) {
    options.update { $0.cipherSuites.append(ciphersuite) }
}

/// The lowest version, in the older `SSLProtocol` terms Apple deprecates; Linux negotiates
/// TLS 1.2 and 1.3 only, so anything older means TLS 1.2.
public func sec_protocol_options_set_tls_min_version(_ options: sec_protocol_options_t, _ version: SSLProtocol) {
    sec_protocol_options_set_min_tls_protocol_version(options, version == .tlsProtocol13 ? .TLSv13 : .TLSv12)
}

/// The highest version, in the older `SSLProtocol` terms (anything below TLS 1.3 means 1.2).
public func sec_protocol_options_set_tls_max_version(_ options: sec_protocol_options_t, _ version: SSLProtocol) {
    sec_protocol_options_set_max_tls_protocol_version(options, version == .tlsProtocol13 || version == .tlsProtocolMaxSupported ? .TLSv13 : .TLSv12)
}

/// The certificate and key this end presents: a listener's (required there), or a client's
/// when the server asks for one. On Linux an identity comes from `SecPKCS12Import`.
///
/// ```swift
/// func serverOptions(identity: SecIdentity) -> NWProtocolTLS.Options {
///     let tls = NWProtocolTLS.Options()
///     sec_protocol_options_set_local_identity(tls.securityProtocolOptions, sec_identity_create(identity)!)
///     return tls
/// }
/// ```
public func sec_protocol_options_set_local_identity(_ options: sec_protocol_options_t, _ identity: sec_identity_t) {
    options.update { $0.localIdentity = identity }
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
