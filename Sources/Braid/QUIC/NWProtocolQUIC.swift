import BraidCore
import BraidQUIC

/// QUIC in the classic API's stacks: `NWProtocolQUIC.Options`, the transport of
/// `NWParameters.quic(alpn:)`. As on Apple's platforms, an `NWConnection` with these
/// parameters is one bidirectional stream of a QUIC connection (opened when the connection
/// starts; `isComplete` on a final context ends it with FIN), and an `NWListener` hands each
/// stream a client opens to `newConnectionHandler` as an `NWConnection` (a listener needs an
/// identity, which the classic options cannot give yet). For several streams and datagrams
/// of one connection, use `NetworkConnection<QUIC>`.
///
/// ```swift
/// let options = NWProtocolQUIC.Options(alpn: ["echo"])
/// options.idleTimeout = 10_000
/// let connection = NWConnection(host: "example.com", port: 4433, using: NWParameters(quic: options))
/// ```
public enum NWProtocolQUIC {
    /// QUIC options: the application protocols offered, the transport parameters, and TLS's
    /// security options (`sec_protocol_options_*`: ALPN, server name; QUIC always runs TLS 1.3).
    /// `isDatagram` is refused with `.posix(.EOPNOTSUPP)` when set (a datagram flow as an
    /// `NWConnection`; `NetworkConnection<QUIC>`'s `datagrams` carry them).
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        private struct Values {
            var alpn: [String]
            var idleTimeout = 30_000
            var initialMaxData: Int?
            var initialMaxStreamDataBidirectionalLocal: Int?
            var initialMaxStreamDataBidirectionalRemote: Int?
            var initialMaxStreamDataUnidirectional: Int?
            var initialMaxStreamsBidirectional: Int?
            var initialMaxStreamsUnidirectional: Int?
            var maxUDPPayloadSize: Int?
            var maxDatagramFrameSize: Int?
            var isDatagram = false
        }
        private let values: Locked<Values>
        /// TLS's options for the connection (`sec_protocol_options_*`).
        public let securityProtocolOptions: sec_protocol_options_t

        /// QUIC offering `alpn`, in preference order.
        public init(alpn: [String]) {
            values = Locked(Values(alpn: alpn))
            securityProtocolOptions = sec_protocol_options_t()
        }

        /// QUIC offering no application protocol yet: set `alpn`, or add them to
        /// `securityProtocolOptions`.
        override public init() {
            values = Locked(Values(alpn: []))
            securityProtocolOptions = sec_protocol_options_t()
        }

        private init(values: Values, security: sec_protocol_options_t) {
            self.values = Locked(values)
            securityProtocolOptions = security
        }

        /// The application protocols offered, in preference order (those added to
        /// `securityProtocolOptions` follow).
        public var alpn: [String] {
            get { values.withLock { $0.alpn } }
            set { values.withLock { $0.alpn = newValue } }
        }

        /// Milliseconds without a packet after which the connection closes (default 30,000).
        public var idleTimeout: Int {
            get { values.withLock { $0.idleTimeout } }
            set { values.withLock { $0.idleTimeout = newValue } }
        }

        /// The connection's receive window in bytes (default as `QUIC.initialMaxData(_:)`).
        public var initialMaxData: Int {
            get { values.withLock { $0.initialMaxData } ?? Int(QUIC.defaultTransport.initialMaxData) }
            set { values.withLock { $0.initialMaxData = newValue } }
        }

        /// The receive window of each bidirectional stream this side opens.
        public var initialMaxStreamDataBidirectionalLocal: Int {
            get { values.withLock { $0.initialMaxStreamDataBidirectionalLocal } ?? Int(QUIC.defaultTransport.initialMaxStreamDataBidirectionalLocal) }
            set { values.withLock { $0.initialMaxStreamDataBidirectionalLocal = newValue } }
        }

        /// The receive window of each bidirectional stream the peer opens.
        public var initialMaxStreamDataBidirectionalRemote: Int {
            get { values.withLock { $0.initialMaxStreamDataBidirectionalRemote } ?? Int(QUIC.defaultTransport.initialMaxStreamDataBidirectionalRemote) }
            set { values.withLock { $0.initialMaxStreamDataBidirectionalRemote = newValue } }
        }

        /// The receive window of each unidirectional stream the peer opens.
        public var initialMaxStreamDataUnidirectional: Int {
            get { values.withLock { $0.initialMaxStreamDataUnidirectional } ?? Int(QUIC.defaultTransport.initialMaxStreamDataUnidirectional) }
            set { values.withLock { $0.initialMaxStreamDataUnidirectional = newValue } }
        }

        /// How many bidirectional streams the peer may have open at once.
        public var initialMaxStreamsBidirectional: Int {
            get { values.withLock { $0.initialMaxStreamsBidirectional } ?? Int(QUIC.defaultTransport.initialMaxBidirectionalStreams) }
            set { values.withLock { $0.initialMaxStreamsBidirectional = newValue } }
        }

        /// How many unidirectional streams the peer may have open at once.
        public var initialMaxStreamsUnidirectional: Int {
            get { values.withLock { $0.initialMaxStreamsUnidirectional } ?? Int(QUIC.defaultTransport.initialMaxUnidirectionalStreams) }
            set { values.withLock { $0.initialMaxStreamsUnidirectional = newValue } }
        }

        /// The largest UDP payload this side sends (see `QUIC.maxUDPPayloadSize(_:)`).
        public var maxUDPPayloadSize: Int {
            get { values.withLock { $0.maxUDPPayloadSize } ?? QUIC.defaultTransport.maxUDPPayloadSize }
            set { values.withLock { $0.maxUDPPayloadSize = newValue } }
        }

        /// The largest DATAGRAM frame this side accepts (see `QUIC.maxDatagramFrameSize(_:)`).
        public var maxDatagramFrameSize: Int {
            get { values.withLock { $0.maxDatagramFrameSize } ?? Int(QUIC.defaultTransport.maxDatagramFrameSize) }
            set { values.withLock { $0.maxDatagramFrameSize = newValue } }
        }

        /// The connection is the QUIC connection's datagram flow rather than a stream
        /// (unsupported: refused when the connection starts).
        public var isDatagram: Bool {
            get { values.withLock { $0.isDatagram } }
            set { values.withLock { $0.isDatagram = newValue } }
        }

        override func copy() -> NWProtocolOptions {
            Options(values: values.withLock { $0 }, security: securityProtocolOptions.copy())
        }

        override func transportStack(ip: IP, parameters: NWParameters) throws -> any StackBinding {
            let values = values.withLock { $0 }
            try requireUnset(values.isDatagram, "NWProtocolQUIC.Options.isDatagram (use NetworkConnection<QUIC>'s datagrams)")
            let security = securityProtocolOptions.values
            var quic = QUIC(alpn: values.alpn + security.applicationProtocols) { UDP { ip } }.idleTimeout(values.idleTimeout)
            if let bytes = values.initialMaxData { quic = quic.initialMaxData(bytes) }
            if let bytes = values.initialMaxStreamDataBidirectionalLocal { quic = quic.initialMaxStreamDataBidirectionalLocal(bytes) }
            if let bytes = values.initialMaxStreamDataBidirectionalRemote { quic = quic.initialMaxStreamDataBidirectionalRemote(bytes) }
            if let bytes = values.initialMaxStreamDataUnidirectional { quic = quic.initialMaxStreamDataUnidirectional(bytes) }
            if let count = values.initialMaxStreamsBidirectional { quic = quic.initialMaxBidirectionalStreams(count) }
            if let count = values.initialMaxStreamsUnidirectional { quic = quic.initialMaxUnidirectionalStreams(count) }
            if let bytes = values.maxUDPPayloadSize { quic = quic.maxUDPPayloadSize(bytes) }
            if let bytes = values.maxDatagramFrameSize { quic = quic.maxDatagramFrameSize(bytes) }
            if let name = security.serverName { quic = quic.serverName(name) }
            if let roots = security.trustRoots { quic = quic.trust(roots) }
            if let identity = security.localIdentity {
                quic = quic.identity(TLSIdentityMaterial(certificates: identity.presentedChain, privateKey: identity.identity.privateKey))
            }
            // QUIC's handshake has no verdict to wait on yet: refusing beats a check the
            // application thinks it made.
            if security.verifyBlock != nil { throw NetworkError.unsupported("verify blocks on QUIC connections (TLS over TCP has them)") }
            if !security.cipherSuites.isEmpty { throw NetworkError.unsupported("cipher suites on QUIC connections") }
            if security.resumptionEnabled { quic = quic.sessionCache(security.sessionCache ?? NWProtocolTLS.sessionCache) }
            return quic
        }
    }
}
