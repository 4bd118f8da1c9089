import BraidCore

extension NWProtocolIP {
    /// The two ECN bits of an IP packet (RFC 3168), as Network.framework names them.
    public enum ECN: Sendable, Hashable {
        /// Not ECN-capable transport.
        case nonECT
        /// ECN-capable transport, codepoint 0.
        case ect0
        /// ECN-capable transport, codepoint 1 (L4S, RFC 9331).
        case ect1
        /// Congestion experienced: a router marked the packet instead of dropping it.
        case ce

        init(_ ecn: BraidCore.ECN) {
            switch ecn {
            case .notECT: self = .nonECT
            case .ect0: self = .ect0
            case .ect1: self = .ect1
            case .congestionExperienced: self = .ce
            }
        }

        /// The datapath's value of the same mark.
        var bits: BraidCore.ECN {
            switch self {
            case .nonECT: .notECT
            case .ect0: .ect0
            case .ect1: .ect1
            case .ce: .congestionExperienced
            }
        }
    }

    /// Per-packet IP metadata: the ECN mark and service class a UDP send asks for (in its
    /// content context on `NWConnection`, in the metadata builder of `NetworkConnection<UDP>`'s
    /// `send(_:metadata:)`), and the ECN mark a received datagram carried (its context's
    /// `protocolMetadata(definition: NWProtocolIP.definition)`).
    ///
    /// ```swift
    /// let ip = NWProtocolIP.Metadata()
    /// ip.ecn = .ect0
    /// let context = NWConnection.ContentContext(identifier: "probe", metadata: [ip])
    /// connection.send(content: Data("ping".utf8), contentContext: context, completion: .contentProcessed { _ in })
    /// ```
    ///
    /// On a byte stream (TCP, TLS, a QUIC stream) packets do not follow sends, so the marks
    /// have no effect there, as on Apple's platforms. A UDP send's `serviceClass` must be the
    /// connection's (`NWParameters.serviceClass`), which marks every packet: Linux sockets mark
    /// per socket, and a send asking for another class fails with `.posix(.EOPNOTSUPP)`.
    public final class Metadata: NWProtocolMetadata, @unchecked Sendable {
        private struct Values {
            var ecn: ECN = .nonECT
            var serviceClass: NWParameters.ServiceClass?
        }
        private let values = Locked(Values())

        /// Metadata that marks nothing: no ECN, the connection's service class.
        override public init() {}

        init(received ecn: BraidCore.ECN) {
            values.withLock { $0.ecn = ECN(ecn) }
        }

        /// The ECN mark to send with (default `.nonECT`), or the one a datagram arrived with.
        public var ecn: ECN {
            get { values.withLock { $0.ecn } }
            set { values.withLock { $0.ecn = newValue } }
        }

        /// The service class to mark the packet with (default `.bestEffort`); see the type's
        /// discussion for what Linux honours.
        public var serviceClass: NWParameters.ServiceClass {
            get { values.withLock { $0.serviceClass ?? .bestEffort } }
            set { values.withLock { $0.serviceClass = newValue } }
        }

        /// When the packet arrived, in nanoseconds: 0, since Braid does not stamp received
        /// packets (`NWProtocolIP.Options.shouldCalculateReceiveTime` is refused).
        public var receiveTime: UInt64 { 0 }

        /// Sets the ECN mark and returns the metadata, for the new API's metadata builder.
        ///
        /// ```swift
        /// try await connection.send(Data("ping".utf8)) { NWProtocolIP.Metadata().ecn(.ect1) }
        /// ```
        @discardableResult
        public func ecn(_ ecn: ECN) -> Self {
            self.ecn = ecn
            return self
        }

        /// Sets the service class and returns the metadata, for the new API's metadata builder.
        @discardableResult
        public func serviceClass(_ serviceClass: NWParameters.ServiceClass) -> Self {
            self.serviceClass = serviceClass
            return self
        }

        /// The service class a send asked for explicitly (nil: the connection's).
        var requestedServiceClass: NWParameters.ServiceClass? { values.withLock { $0.serviceClass } }

        override var definition: NWProtocolDefinition? { NWProtocolIP.definition }
    }
}

/// What a UDP send's IP metadata asks of the datapath.
struct IPSendMarks: Sendable, Hashable {
    var ecn: ECN = .notECT

    /// No marks.
    init() {}

    /// The marks `metadata` asks for on a connection whose packets carry `serviceClass`;
    /// throws `unsupported` for a per-message service class Linux cannot apply.
    init(_ metadata: [NWProtocolMetadata], connectionServiceClass serviceClass: NWParameters.ServiceClass) throws {
        guard let ip = metadata.lazy.compactMap({ $0 as? NWProtocolIP.Metadata }).first else { return }
        if let requested = ip.requestedServiceClass, requested != serviceClass {
            throw NetworkError.unsupported(
                "a per-message service class (\(requested)) other than the connection's (\(serviceClass)) on Linux, which marks per socket: set NWParameters.serviceClass, or .serviceClass(_:) on the parameters")
        }
        ecn = ip.ecn.bits
    }
}
