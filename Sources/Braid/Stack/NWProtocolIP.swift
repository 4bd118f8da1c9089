import BraidCore

/// IP in the classic API's stacks: `NWProtocolIP.Options`, under `NWParameters`'
/// `defaultProtocolStack.internetProtocol`.
///
/// ```swift
/// let parameters = NWParameters.udp
/// if let ip = parameters.defaultProtocolStack.internetProtocol as? NWProtocolIP.Options {
///     ip.version = .v6
/// }
/// ```
public enum NWProtocolIP {
    /// IP options. `version`, `hopLimit` and `disableFragmentation` are applied;
    /// `useMinimumMTU`, `shouldCalculateReceiveTime`, `localAddressPreference` and
    /// `disableMulticastLoopback` are refused with `.posix(.EOPNOTSUPP)` when set.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        /// The address family connections use.
        public enum Version: Sendable, Hashable { case any, v4, v6 }
        /// Which local addresses IPv6 prefers.
        public enum AddressPreference: Sendable, Hashable { case `default`, temporary, stable }

        private struct Values {
            var version: Version = .any
            var hopLimit: UInt8 = 0
            var useMinimumMTU = false
            var disableFragmentation = false
            var shouldCalculateReceiveTime = false
            var localAddressPreference: AddressPreference = .default
            var disableMulticastLoopback = false
        }
        private let values = Locked(Values())

        override public init() {}

        /// The address family (default `.any`: IPv6 and IPv4, raced).
        public var version: Version {
            get { values.withLock { $0.version } }
            set { values.withLock { $0.version = newValue } }
        }
        /// The hop limit of sent packets (0: the system's default).
        public var hopLimit: UInt8 {
            get { values.withLock { $0.hopLimit } }
            set { values.withLock { $0.hopLimit = newValue } }
        }
        /// Send IPv6 packets no larger than the minimum MTU (unsupported).
        public var useMinimumMTU: Bool {
            get { values.withLock { $0.useMinimumMTU } }
            set { values.withLock { $0.useMinimumMTU = newValue } }
        }
        /// Set the don't-fragment bit on sent packets.
        public var disableFragmentation: Bool {
            get { values.withLock { $0.disableFragmentation } }
            set { values.withLock { $0.disableFragmentation = newValue } }
        }
        /// Stamp received packets with their receive time (unsupported).
        public var shouldCalculateReceiveTime: Bool {
            get { values.withLock { $0.shouldCalculateReceiveTime } }
            set { values.withLock { $0.shouldCalculateReceiveTime = newValue } }
        }
        /// Temporary or stable IPv6 source addresses (unsupported but `.default`).
        public var localAddressPreference: AddressPreference {
            get { values.withLock { $0.localAddressPreference } }
            set { values.withLock { $0.localAddressPreference = newValue } }
        }
        /// Do not loop multicast back to this host (unsupported).
        public var disableMulticastLoopback: Bool {
            get { values.withLock { $0.disableMulticastLoopback } }
            set { values.withLock { $0.disableMulticastLoopback = newValue } }
        }

        override func copy() -> NWProtocolOptions {
            let copied = Options()
            let values = values.withLock { $0 }
            copied.values.withLock { $0 = values }
            return copied
        }

        /// The new API's IP options; throws for what Linux cannot apply.
        var ip: IP {
            get throws {
                let values = values.withLock { $0 }
                try requireUnset(values.useMinimumMTU, "NWProtocolIP.Options.useMinimumMTU")
                try requireUnset(values.shouldCalculateReceiveTime, "NWProtocolIP.Options.shouldCalculateReceiveTime")
                try requireUnset(values.localAddressPreference != .default, "NWProtocolIP.Options.localAddressPreference")
                try requireUnset(values.disableMulticastLoopback, "NWProtocolIP.Options.disableMulticastLoopback")
                var ip = IP()
                switch values.version {
                case .any: break
                case .v4: ip = ip.version(.v4)
                case .v6: ip = ip.version(.v6)
                }
                if values.hopLimit > 0 { ip = ip.hopLimit(values.hopLimit) }
                if values.disableFragmentation { ip = ip.fragmentationDisabled(true) }
                return ip
            }
        }
    }
}
