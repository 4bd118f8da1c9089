import BraidSecurity
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A DNS-SD error code, as Network.framework's `NWError.dns` carries it.
public typealias DNSServiceErrorType = Int32

/// The errors of the classic API (`NWConnection`, `NWListener`), with Network.framework's
/// cases: a POSIX error, a DNS error or a TLS error. Braid fills them from the same failures
/// `NetworkError` reports on the new API, and each code's description says what happened and
/// what to do (`debugDescription`, `localizedDescription`).
///
/// ```swift
/// connection.stateUpdateHandler = { state in
///     if case .failed(.posix(.ECONNREFUSED)) = state { print("nothing listens there") }
/// }
/// ```
public enum NWError: Error, Sendable, Hashable, CustomDebugStringConvertible, LocalizedError {
    /// A system error: refused, reset, timed out, cancelled (`ECANCELED`), unreachable.
    case posix(POSIXErrorCode)
    /// Name resolution failed (DNS-SD codes: `-65554` no such record, `-65537` unknown).
    case dns(DNSServiceErrorType)
    /// TLS failed (Security framework codes: `-9812` unknown root, `-9843` name mismatch, ...).
    case tls(OSStatus)

    public var debugDescription: String {
        switch self {
        case .posix(let code):
            "POSIXErrorCode(rawValue: \(code.rawValue)): \(String(cString: strerror(code.rawValue)))\(Self.advice(posix: code))"
        case .dns(let code):
            "DNS error \(code): \(Self.advice(dns: code))"
        case .tls(let code):
            "TLS error \(code)\(Self.tlsNames[code].map { " (\($0.name)): \($0.advice)" } ?? ".")"
        }
    }

    public var errorDescription: String? { debugDescription }

    private static func advice(posix code: POSIXErrorCode) -> String {
        switch code {
        case .ECONNREFUSED: ". Nothing listens at that address and port, or the server is busy: check both, and that the server runs."
        case .ECONNRESET: ". The peer closed the connection abruptly. Connect again."
        case .ETIMEDOUT: ". No response in time: check that the peer is reachable and listening, or raise the timeout."
        case .ECANCELED: ". The connection was cancelled before the operation completed."
        case .ENETUNREACH, .ENETDOWN: ". No usable network path (or none the parameters allow); the connection waits for one."
        case .EOPNOTSUPP: ". Braid does not support this yet on Linux."
        case .EMSGSIZE: ". The message is larger than the connection allows."
        case .EINVAL: ". The parameters or options are invalid."
        default: "."
        }
    }

    private static func advice(dns code: DNSServiceErrorType) -> String {
        switch code {
        case noSuchRecord: "the name has no address. Check the spelling, or use an IP address."
        default: "the lookup failed. Check the resolver configuration (/etc/resolv.conf) and connectivity."
        }
    }

    /// DNS-SD's code for a name without addresses.
    static let noSuchRecord: DNSServiceErrorType = -65554
    /// DNS-SD's code for any other failure.
    static let unknownDNSFailure: DNSServiceErrorType = -65537

    /// The Security framework's names for the TLS codes Braid reports, and what to do.
    static let tlsNames: [OSStatus: (name: String, advice: String)] = [
        -9800: ("errSSLProtocol", "the TLS exchange failed; see the peer's logs."),
        -9802: ("errSSLFatalAlert", "the peer aborted the handshake with an alert."),
        -9808: ("errSSLBadCert", "the peer's certificate was rejected (invalid, missing, or not matching the pins or the verify block)."),
        -9812: ("errSSLUnknownRootCert", "the peer's certificate is not signed by a trusted authority: trust its CA, or connect to a server whose certificate the system trusts."),
        -9814: ("errSSLCertExpired", "the peer's certificate has expired or is not yet valid."),
        -9816: ("errSSLClosedNoNotify", "the peer closed without TLS close_notify: what arrived may be cut short."),
        -9824: ("errSSLPeerHandshakeFail", "the peer refused the handshake (no common cipher suite or group)."),
        -9825: ("errSSLPeerBadCert", "the peer did not accept our certificate."),
        -9826: ("errSSLPeerUnsupportedCert", "the peer does not support our certificate's type."),
        -9827: ("errSSLPeerCertRevoked", "the peer says our certificate is revoked."),
        -9828: ("errSSLPeerCertExpired", "the peer says our certificate has expired."),
        -9829: ("errSSLPeerCertUnknown", "the peer could not use our certificate."),
        -9831: ("errSSLPeerUnknownCA", "the peer does not trust the authority that signed our certificate."),
        -9836: ("errSSLPeerProtocolVersion", "the peer allows none of our TLS versions."),
        -9843: ("errSSLHostNameMismatch", "the peer's certificate is not valid for the name connected to: connect with the name in the certificate, or set the server name."),
        -9858: ("errSSLHandshakeFail", "the handshake failed (for example, no common application protocol)."),
        -9863: ("errSSLCertificateRequired", "the peer requires a client certificate: set a local identity."),
        -9865: ("errSSLUnrecognizedName", "the peer does not serve the name asked for (SNI)."),
    ]
}
