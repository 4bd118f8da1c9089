import BraidCore

/// QUIC in the classic API's stacks: `NWProtocolQUIC.Options`, the transport of
/// `NWParameters.quic(alpn:)`. `NWConnection` does not run QUIC yet (its connections fail with
/// `.posix(.EOPNOTSUPP)`); `NetworkConnection<QUIC>` does.
public enum NWProtocolQUIC {
    /// QUIC options: the application protocols offered, and the idle timeout.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        private struct Values {
            var alpn: [String]
            var idleTimeout = 30_000
        }
        private let values: Locked<Values>

        /// QUIC offering `alpn`, in preference order.
        public init(alpn: [String]) {
            values = Locked(Values(alpn: alpn))
        }

        /// The application protocols offered, in preference order.
        public var alpn: [String] {
            get { values.withLock { $0.alpn } }
            set { values.withLock { $0.alpn = newValue } }
        }

        /// Milliseconds without a packet after which the connection closes (default 30,000).
        public var idleTimeout: Int {
            get { values.withLock { $0.idleTimeout } }
            set { values.withLock { $0.idleTimeout = newValue } }
        }

        override func copy() -> NWProtocolOptions {
            let copied = Options(alpn: alpn)
            copied.idleTimeout = idleTimeout
            return copied
        }

        override func transportStack(ip: IP, parameters: NWParameters) throws -> any StackBinding {
            let values = values.withLock { $0 }
            return QUIC(alpn: values.alpn) { UDP { ip } }.idleTimeout(values.idleTimeout)
        }
    }
}
