/// Where a TLS endpoint finds the certificate authorities it trusts.
public enum TLSTrustRoots: Sendable, Hashable {
    /// The operating system's trust store.
    case system
    /// PEM certificate authorities in this file (only these are trusted).
    case certificateAuthorityFile(String)
}
