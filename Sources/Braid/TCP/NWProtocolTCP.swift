import BraidCore

/// TCP in the classic API's stacks: `NWProtocolTCP.Options`, the transport of
/// `NWParameters.tcp` and `.tls`.
///
/// ```swift
/// let tcp = NWProtocolTCP.Options()
/// tcp.noDelay = true
/// tcp.enableKeepalive = true
/// tcp.keepaliveIdle = 30
/// let parameters = NWParameters(tls: nil, tcp: tcp)
/// ```
public enum NWProtocolTCP {
    /// TCP options. `noDelay`, the keep-alive fields, `connectionTimeout` and `enableFastOpen`
    /// are applied; the others (`noPush`, `noOptions`, `maximumSegmentSize`,
    /// `persistTimeout`, `connectionDropTime`, `retransmitFinDrop`, `disableAckStretching`,
    /// `disableECN`) are refused with `.posix(.EOPNOTSUPP)` when set, since Linux has no
    /// per-socket switch for them or Braid does not apply them yet.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        private struct Values {
            var noDelay = false
            var noPush = false
            var noOptions = false
            var enableKeepalive = false
            var keepaliveCount = 0
            var keepaliveIdle = 0
            var keepaliveInterval = 0
            var maximumSegmentSize = 0
            var connectionTimeout = 0
            var persistTimeout = 0
            var connectionDropTime = 0
            var retransmitFinDrop = false
            var disableAckStretching = false
            var enableFastOpen = false
            var disableECN = false
            var newConnectionLimitPerAddress = 1_000
        }
        private let values = Locked(Values())

        override public init() {}

        /// Send small segments at once (TCP_NODELAY).
        public var noDelay: Bool {
            get { values.withLock { $0.noDelay } }
            set { values.withLock { $0.noDelay = newValue } }
        }
        /// Unsupported when set.
        public var noPush: Bool {
            get { values.withLock { $0.noPush } }
            set { values.withLock { $0.noPush = newValue } }
        }
        /// Unsupported when set.
        public var noOptions: Bool {
            get { values.withLock { $0.noOptions } }
            set { values.withLock { $0.noOptions = newValue } }
        }
        /// Probe an idle connection (SO_KEEPALIVE, with the three fields below).
        public var enableKeepalive: Bool {
            get { values.withLock { $0.enableKeepalive } }
            set { values.withLock { $0.enableKeepalive = newValue } }
        }
        /// Unanswered probes before the connection fails (0: Linux's default, 9).
        public var keepaliveCount: Int {
            get { values.withLock { $0.keepaliveCount } }
            set { values.withLock { $0.keepaliveCount = newValue } }
        }
        /// Idle seconds before the first probe (0: Linux's default, 7,200).
        public var keepaliveIdle: Int {
            get { values.withLock { $0.keepaliveIdle } }
            set { values.withLock { $0.keepaliveIdle = newValue } }
        }
        /// Seconds between probes (0: Linux's default, 75).
        public var keepaliveInterval: Int {
            get { values.withLock { $0.keepaliveInterval } }
            set { values.withLock { $0.keepaliveInterval = newValue } }
        }
        /// Unsupported when set.
        public var maximumSegmentSize: Int {
            get { values.withLock { $0.maximumSegmentSize } }
            set { values.withLock { $0.maximumSegmentSize = newValue } }
        }
        /// Seconds a connect may take (0: the system's default).
        public var connectionTimeout: Int {
            get { values.withLock { $0.connectionTimeout } }
            set { values.withLock { $0.connectionTimeout = newValue } }
        }
        /// Unsupported when set.
        public var persistTimeout: Int {
            get { values.withLock { $0.persistTimeout } }
            set { values.withLock { $0.persistTimeout = newValue } }
        }
        /// Unsupported when set.
        public var connectionDropTime: Int {
            get { values.withLock { $0.connectionDropTime } }
            set { values.withLock { $0.connectionDropTime = newValue } }
        }
        /// Unsupported when set.
        public var retransmitFinDrop: Bool {
            get { values.withLock { $0.retransmitFinDrop } }
            set { values.withLock { $0.retransmitFinDrop = newValue } }
        }
        /// Unsupported when set.
        public var disableAckStretching: Bool {
            get { values.withLock { $0.disableAckStretching } }
            set { values.withLock { $0.disableAckStretching = newValue } }
        }
        /// TCP Fast Open (also `NWParameters.allowFastOpen`).
        public var enableFastOpen: Bool {
            get { values.withLock { $0.enableFastOpen } }
            set { values.withLock { $0.enableFastOpen = newValue } }
        }
        /// Unsupported when set (Linux's ECN for TCP is a system-wide setting).
        public var disableECN: Bool {
            get { values.withLock { $0.disableECN } }
            set { values.withLock { $0.disableECN = newValue } }
        }

        /// Listener: most connections from one IP address, any port, IPv6 by /64 prefix
        /// (default 1,000; 0: no limit), so one address cannot take every place of the
        /// listener's `newConnectionLimit`. Further connections from that address are reset as
        /// soon as they are accepted. Applies to TLS listeners too (`NWParameters(tls:tcp:)`).
        /// Apple's Network.framework has no such option; this is Braid's, as
        /// `TCP.newConnectionLimitPerAddress(_:)` in the new API. A negative value fails the
        /// listener.
        ///
        /// ```swift
        /// let tcp = NWProtocolTCP.Options()
        /// tcp.newConnectionLimitPerAddress = 50
        /// let listener = try NWListener(using: NWParameters(tls: nil, tcp: tcp))
        /// ```
        public var newConnectionLimitPerAddress: Int {
            get { values.withLock { $0.newConnectionLimitPerAddress } }
            set { values.withLock { $0.newConnectionLimitPerAddress = newValue } }
        }

        override func copy() -> NWProtocolOptions {
            let copied = Options()
            let values = values.withLock { $0 }
            copied.values.withLock { $0 = values }
            return copied
        }

        override func transportStack(ip: IP, parameters: NWParameters) throws -> any StackBinding {
            let values = values.withLock { $0 }
            try requireUnset(values.noPush, "NWProtocolTCP.Options.noPush")
            try requireUnset(values.noOptions, "NWProtocolTCP.Options.noOptions")
            try requireUnset(values.maximumSegmentSize != 0, "NWProtocolTCP.Options.maximumSegmentSize")
            try requireUnset(values.persistTimeout != 0, "NWProtocolTCP.Options.persistTimeout")
            try requireUnset(values.connectionDropTime != 0, "NWProtocolTCP.Options.connectionDropTime")
            try requireUnset(values.retransmitFinDrop, "NWProtocolTCP.Options.retransmitFinDrop")
            try requireUnset(values.disableAckStretching, "NWProtocolTCP.Options.disableAckStretching")
            try requireUnset(values.disableECN, "NWProtocolTCP.Options.disableECN")
            var tcp = TCP { ip }.noDelay(values.noDelay)
            if values.enableKeepalive {
                tcp = tcp.keepalive(
                    idleTimeInSeconds: Self.seconds(values.keepaliveIdle, default: 7200), count: Self.seconds(values.keepaliveCount, default: 9),
                    intervalInSeconds: Self.seconds(values.keepaliveInterval, default: 75))
            }
            if values.connectionTimeout > 0 { tcp = tcp.connectionTimeout(Self.seconds(values.connectionTimeout, default: 0)) }
            if values.enableFastOpen { tcp = tcp.fastOpenAllowed(true) }
            return tcp.newConnectionLimitPerAddress(values.newConnectionLimitPerAddress)
        }

        /// `value` as the socket option's unsigned value, `default` for 0 or less.
        private static func seconds(_ value: Int, default fallback: UInt32) -> UInt32 {
            value > 0 ? UInt32(clamping: value) : fallback
        }
    }
}
