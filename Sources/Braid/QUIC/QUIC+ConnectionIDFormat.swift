import BraidQUIC
import Foundation

extension QUIC {
    /// How a listener lays out the connection IDs it gives clients, so that a QUIC-aware load
    /// balancer in front of several servers routes every packet of a connection (also after the
    /// client's address changes) to the server that holds it. Network.framework has no such
    /// option; set it with `QUIC.connectionIDFormat(_:)`.
    ///
    /// ```swift
    /// let listener = NetworkListener(port: 4433) {
    ///     QUIC(alpn: ["h3"])
    ///         .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    ///         .connectionIDFormat(.quicLB(configRotation: 0, serverID: Data([0x0a, 0x01]), nonceLength: 8))
    /// }
    /// ```
    ///
    /// Every format keeps one byte of its own (after the balancer's part) that steers packets to
    /// the right loop when the listener runs on several (`serverLoops(_:)`); balancers ignore it.
    public struct ConnectionIDFormat: Sendable, Hashable {
        package let engineFormat: QUICConnectionIDFormat

        /// Katran's connection-ID versions (the width of the server ID).
        public enum KatranVersion: Sendable, Hashable {
            /// 16-bit server IDs.
            case v1
            /// 24-bit server IDs.
            case v2
            /// 32-bit server IDs.
            case v3
        }

        /// Random 16-byte IDs (the default): for a single server, or balancers that route by address.
        public static let random = ConnectionIDFormat(engineFormat: .random)

        /// QUIC-LB (draft-ietf-quic-load-balancers): a first octet with the 3 config-rotation
        /// bits, then this server's ID and a nonce, encrypted with AES-128 when `key` is given.
        /// IDs are `2 + serverID.count + nonceLength` bytes (at most 20).
        /// - Parameters:
        ///   - configRotation: the configuration's codepoint, 0 to 6.
        ///   - serverID: this server's ID, 1 to 15 bytes, as the balancer has it.
        ///   - nonceLength: 4 bytes or more; `serverID.count + nonceLength` at most 18. Encrypted,
        ///     each loop issues half of 256^(nonceLength − 1) IDs after handshakes (Retry and
        ///     handshake IDs take random nonces) before it must get a new configuration.
        ///   - key: the balancer's 16-byte key; nil puts the server ID in clear.
        ///   - encodesLength: the first octet's low 5 bits give the ID's length (else random).
        public static func quicLB(
            configRotation: Int, serverID: Data, nonceLength: Int, key: Data? = nil, encodesLength: Bool = true
        ) -> ConnectionIDFormat {
            ConnectionIDFormat(
                engineFormat: .quicLB(
                    QUICLBConfiguration(
                        configRotation: UInt8(exactly: configRotation) ?? .max, serverID: Array(serverID), nonceLength: nonceLength,
                        key: key.map(Array.init), encodesLength: encodesLength)))
        }

        /// Katran: the version in the top 2 bits, then the server ID (`v1`: 1 to 65,535, `v2`:
        /// up to 2^24 − 1, `v3`: up to 2^32 − 1; never 0), 16-byte IDs.
        public static func katran(version: KatranVersion, serverID: UInt32) -> ConnectionIDFormat {
            let engineVersion: KatranConnectionIDVersion =
                switch version {
                case .v1: .v1
                case .v2: .v2
                case .v3: .v3
                }
            return ConnectionIDFormat(engineFormat: .katran(engineVersion, serverID: serverID))
        }

        /// AWS Network Load Balancer QUIC passthrough with the target's 8-byte `QuicServerId`.
        /// Not supported yet: a listener with it fails with `NetworkError.unsupported`, because
        /// AWS documents the server ID but not where it goes in the connection ID.
        public static func awsNetworkLoadBalancer(serverID: UInt64) -> ConnectionIDFormat {
            ConnectionIDFormat(engineFormat: .awsNetworkLoadBalancer(serverID: serverID))
        }
    }

    /// Listener: lay out connection IDs for a load balancer (default `.random`).
    ///
    /// ```swift
    /// let quic = QUIC(alpn: ["h3"]).connectionIDFormat(.katran(version: .v2, serverID: 42))
    /// ```
    public func connectionIDFormat(_ format: ConnectionIDFormat) -> QUIC { with { $0.connectionIDFormat = format } }

    /// The engine's format, checked: a wrong parameter is `.invalidConfiguration`, AWS `.unsupported`.
    func validatedConnectionIDFormat() throws -> QUICConnectionIDFormat {
        let format = connectionIDFormat.engineFormat
        if case .awsNetworkLoadBalancer = format {
            throw NetworkError.unsupported(
                "AWS Network Load Balancer connection IDs (AWS documents the 8-byte server ID but not its place in the connection ID); use .quicLB or .katran")
        }
        do {
            try format.validate()
        } catch {
            throw NetworkError.invalidConfiguration(error.description)
        }
        return format
    }
}
