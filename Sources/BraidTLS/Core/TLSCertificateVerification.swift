/// How a client checks the server's certificate. The default verifies the chain against the
/// system trust store and the certificate's name against the server name.
public struct TLSCertificateVerification: Sendable, Hashable {
    /// The certificate authorities the chain must lead to.
    public var trustRoots: TLSTrustRoots = .system
    /// SHA-256 digests of acceptable SubjectPublicKeyInfos (see `spkiSHA256Pin(ofPEMCertificateFile:)`).
    /// When not empty, the leaf's key must match one, in addition to the chain and name checks.
    public var pinnedSPKISHA256: [[UInt8]] = []
    /// Skips the chain and hostname checks (pins still apply). Only for tests and pinned setups.
    public var insecureSkipChainAndHostnameVerification = false

    public init(trustRoots: TLSTrustRoots = .system, pinnedSPKISHA256: [[UInt8]] = []) {
        self.trustRoots = trustRoots
        self.pinnedSPKISHA256 = pinnedSPKISHA256
    }

    /// Accepts any certificate. Never use in production.
    public static var insecureAcceptAnything: TLSCertificateVerification {
        var v = TLSCertificateVerification()
        v.insecureSkipChainAndHostnameVerification = true
        return v
    }

    /// What a resumption ticket was earned under: a session resumes only under the same checks
    /// that accepted its server, so a ticket from a connection that trusted other authorities
    /// or pins, or skipped the checks, never lets another connection skip its own.
    package var resumptionScope: String {
        let roots = switch trustRoots {
        case .system: "system"
        case .certificateAuthorityFile(let path): "ca=\(path)"
        }
        let pins = pinnedSPKISHA256.map { $0.map { String($0, radix: 16) }.joined() }.sorted().joined(separator: ",")
        return "\(roots);pins=\(pins);\(insecureSkipChainAndHostnameVerification ? "unchecked" : "checked")"
    }

    /// Throws unless every pin is a SHA-256 digest.
    package func validate() throws(TLSError) {
        for pin in pinnedSPKISHA256 where pin.count != 32 {
            throw .configuration("SPKI pins are SHA-256 digests (32 bytes); got \(pin.count) bytes")
        }
    }
}
