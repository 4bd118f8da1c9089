/// A protocol's identity in the classic API: what `NWConnection.metadata(definition:)` asks
/// for (`NWProtocolTLS.definition`, `NWProtocolTCP.definition`, ...).
///
/// `@unchecked Sendable`: not final (a custom framer's `NWProtocolFramer.Definition` is one),
/// and every stored property, here and in the subclass, is an immutable `let`.
public class NWProtocolDefinition: @unchecked Sendable, Hashable, CustomDebugStringConvertible {
    /// The protocol's name ("tls", "tcp", "udp", "ip", "quic").
    public let name: String

    init(name: String) { self.name = name }

    public static func == (lhs: NWProtocolDefinition, rhs: NWProtocolDefinition) -> Bool { lhs.name == rhs.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
    public var debugDescription: String { name }
}

extension NWProtocolTCP {
    /// TCP's definition.
    public static let definition = NWProtocolDefinition(name: "tcp")
}

extension NWProtocolUDP {
    /// UDP's definition.
    public static let definition = NWProtocolDefinition(name: "udp")
}

extension NWProtocolIP {
    /// IP's definition.
    public static let definition = NWProtocolDefinition(name: "ip")
}

extension NWProtocolTLS {
    /// TLS's definition.
    public static let definition = NWProtocolDefinition(name: "tls")
}

extension NWProtocolQUIC {
    /// QUIC's definition.
    public static let definition = NWProtocolDefinition(name: "quic")
}
