import BraidCore

/// UDP in the classic API's stacks: `NWProtocolUDP.Options`, the transport of `NWParameters.udp`.
public enum NWProtocolUDP {
    /// UDP options. `preferNoChecksum` is refused with `.posix(.EOPNOTSUPP)` when set.
    public final class Options: NWProtocolOptions, @unchecked Sendable {
        private let noChecksum = Locked(false)

        override public init() {}

        /// Send IPv4 datagrams without a checksum (unsupported).
        public var preferNoChecksum: Bool {
            get { noChecksum.withLock { $0 } }
            set { noChecksum.withLock { $0 = newValue } }
        }

        override func copy() -> NWProtocolOptions {
            let copied = Options()
            copied.preferNoChecksum = preferNoChecksum
            return copied
        }

        override func transportStack(ip: IP, parameters: NWParameters) throws -> any StackBinding {
            try requireUnset(preferNoChecksum, "NWProtocolUDP.Options.preferNoChecksum")
            return UDP { ip }
        }
    }
}
