import CBraid

/// A TLS protocol version Braid negotiates.
public enum TLSVersion: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
    case v1_2 = 12
    case v1_3 = 13

    public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { self == .v1_2 ? "TLS 1.2" : "TLS 1.3" }

    /// The priority-string keyword that enables this version.
    var priorityKeyword: String { self == .v1_2 ? "+VERS-TLS1.2" : "+VERS-TLS1.3" }

    init?(_ protocolVersion: gnutls_protocol_t) {
        switch protocolVersion {
        case GNUTLS_TLS1_2: self = .v1_2
        case GNUTLS_TLS1_3: self = .v1_3
        default: return nil
        }
    }
}
