/// Why a peer certificate was not accepted.
public enum CertificateProblem: Sendable, Hashable, CustomStringConvertible {
    /// The chain does not lead to a trusted root (self-signed, unknown CA).
    case untrusted
    /// The certificate does not name the host we connected to.
    case nameMismatch(expected: String)
    /// The certificate has expired or is not yet valid.
    case expired
    /// The certificate was revoked or is otherwise invalid (bad signature, insecure algorithm).
    case invalid(String)
    /// The certificate's public key matches none of the configured SPKI pins.
    case pinMismatch
    /// The peer sent no certificate.
    case missing
    /// The application's own check (a verify block) refused it.
    case rejected

    public var description: String {
        switch self {
        case .untrusted: "not signed by a trusted certificate authority"
        case .nameMismatch(let name): "not valid for the name \"\(name)\""
        case .expired: "expired or not yet valid"
        case .invalid(let why): "invalid (\(why))"
        case .pinMismatch: "public key does not match any configured SPKI pin"
        case .missing: "no certificate was presented"
        case .rejected: "refused by the application's own verification"
        }
    }
}
