/// The two ECN bits of the IP header (RFC 3168), as a datagram carries them in and out.
public enum ECN: UInt8, Sendable, Hashable {
    case notECT = 0
    case ect1 = 1
    case ect0 = 2
    case congestionExperienced = 3

    /// The low two bits of a TOS / traffic-class byte, or of an engine's ECN field.
    @inlinable package init(bits: UInt32) { self = ECN(rawValue: UInt8(bits & 0x3)) ?? .notECT }
}
