/// The outcome of the older `SecTrustEvaluate` (Apple's `SecTrustResultType`).
public enum SecTrustResultType: UInt32, Sendable {
    case invalid = 0
    /// Trusted, and the user said so explicitly (not produced on Linux).
    case proceed = 1
    /// Distrusted explicitly (not produced on Linux).
    case deny = 3
    /// Trusted: the chain leads to an anchor and the policies hold.
    case unspecified = 4
    /// Not trusted, but the failure may be overridden (unknown anchor, name, dates).
    case recoverableTrustFailure = 5
    /// Not trusted, and no override helps (a malformed or revoked certificate).
    case fatalTrustFailure = 6
    case otherError = 7
}
