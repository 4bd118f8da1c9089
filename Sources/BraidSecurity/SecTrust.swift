import BraidCore
import Dispatch
import Foundation

/// A certificate chain and what it must satisfy (Apple's `SecTrust`): the peer's chain in a
/// TLS verify block, evaluated against the system's authorities, or against anchors of the
/// application's own, on Linux with GnuTLS.
///
/// ```swift
/// var error: CFError?
/// if SecTrustEvaluateWithError(trust, &error) {
///     print("trusted")
/// } else {
///     print("not trusted: \(error.map { String(describing: $0) } ?? "")")
/// }
/// ```
public final class SecTrust: Sendable {
    struct Settings: Sendable {
        var certificates: [SecCertificate]
        var policies: [SecPolicy]
        /// The application's anchors; nil: the system's.
        var anchors: [SecCertificate]?
        /// With anchors set: only they are trusted (Apple's default), not the system's too.
        var anchorsOnly = true
    }
    let settings: Locked<Settings>

    init(certificates: [SecCertificate], policies: [SecPolicy]) {
        settings = Locked(Settings(certificates: certificates, policies: policies))
    }

    /// Tests point the system's authorities at a CA file of their own, so examples that
    /// evaluate against the system store run unchanged against a test server. Nil (always,
    /// outside tests): the system store.
    package static let systemAnchorsForTesting = Locked<String?>(nil)
}

/// The callback of `SecTrustEvaluateAsyncWithError`.
public typealias SecTrustWithErrorCallback = @Sendable (_ trust: SecTrust, _ result: Bool, _ error: CFError?) -> Void

/// A trust for `certificates` (one `SecCertificate`, or an array of them, leaf first) under
/// `policies` (one `SecPolicy`, an array, or nil for the basic X.509 policy).
@discardableResult
public func SecTrustCreateWithCertificates(
    _ certificates: CFTypeRef, _ policies: CFTypeRef?, _ trust: UnsafeMutablePointer<SecTrust?>
) -> OSStatus {
    let chain = objects(of: SecCertificate.self, in: certificates)
    guard !chain.isEmpty else { return errSecParam }
    let rules = policies.map { objects(of: SecPolicy.self, in: $0) } ?? [SecPolicyCreateBasicX509()]
    trust.pointee = SecTrust(certificates: chain, policies: rules)
    return errSecSuccess
}

/// Replaces the policies the trust is evaluated under.
@discardableResult
public func SecTrustSetPolicies(_ trust: SecTrust, _ policies: CFTypeRef) -> OSStatus {
    let rules = objects(of: SecPolicy.self, in: policies)
    trust.settings.withLock { $0.policies = rules }
    return errSecSuccess
}

/// Trusts these authorities, and from now on only them (unless
/// `SecTrustSetAnchorCertificatesOnly(trust, false)` adds the system's back).
@discardableResult
public func SecTrustSetAnchorCertificates(_ trust: SecTrust, _ anchorCertificates: CFArray) -> OSStatus {
    let anchors = objects(of: SecCertificate.self, in: anchorCertificates)
    trust.settings.withLock { $0.anchors = anchors }
    return errSecSuccess
}

/// Whether the anchors set with `SecTrustSetAnchorCertificates` are the only ones trusted
/// (true, the default) or trusted beside the system's.
@discardableResult
public func SecTrustSetAnchorCertificatesOnly(_ trust: SecTrust, _ anchorCertificatesOnly: Bool) -> OSStatus {
    trust.settings.withLock { $0.anchorsOnly = anchorCertificatesOnly }
    return errSecSuccess
}

/// Evaluates the chain against the anchors and policies: true if trusted; otherwise false and
/// `error` says why (its code an `OSStatus` such as `errSecNotTrusted`).
@discardableResult
public func SecTrustEvaluateWithError(_ trust: SecTrust, _ error: UnsafeMutablePointer<CFError?>?) -> Bool {
    let failure = trust.evaluate()
    error?.pointee = failure
    return failure == nil
}

/// Evaluates on `queue` and calls `result` there with the outcome.
@discardableResult
public func SecTrustEvaluateAsyncWithError(
    _ trust: SecTrust, _ queue: DispatchQueue, _ result: @escaping SecTrustWithErrorCallback
) -> OSStatus {
    queue.async {
        let failure = trust.evaluate()
        result(trust, failure == nil, failure)
    }
    return errSecSuccess
}

/// The older evaluation (Apple deprecates it for `SecTrustEvaluateWithError`): the outcome as
/// a `SecTrustResultType` (`.unspecified`: trusted).
@discardableResult
public func SecTrustEvaluate(_ trust: SecTrust, _ result: UnsafeMutablePointer<SecTrustResultType>) -> OSStatus {
    guard let failure = trust.evaluate() else {
        result.pointee = .unspecified
        return errSecSuccess
    }
    result.pointee = Int32(failure.code) == errSecInvalidCertificateRef ? .fatalTrustFailure : .recoverableTrustFailure
    return errSecSuccess
}

/// The leaf certificate's public key.
public func SecTrustCopyKey(_ trust: SecTrust) -> SecKey? {
    trust.settings.withLock { $0.certificates.first }.flatMap(SecCertificateCopyKey)
}

/// The leaf certificate's public key (Apple's older name for `SecTrustCopyKey`).
public func SecTrustCopyPublicKey(_ trust: SecTrust) -> SecKey? {
    SecTrustCopyKey(trust)
}

/// How many certificates the chain has.
public func SecTrustGetCertificateCount(_ trust: SecTrust) -> CFIndex {
    trust.settings.withLock { $0.certificates.count }
}

/// The chain's certificate at `ix` (0: the leaf); nil past the end. Apple deprecates it for
/// `SecTrustCopyCertificateChain`.
public func SecTrustGetCertificateAtIndex(_ trust: SecTrust, _ ix: CFIndex) -> SecCertificate? {
    trust.settings.withLock { ix >= 0 && ix < $0.certificates.count ? $0.certificates[ix] : nil }
}

/// The chain, leaf first, as an array of `SecCertificate`.
public func SecTrustCopyCertificateChain(_ trust: SecTrust) -> CFArray? {
    let chain = trust.settings.withLock { $0.certificates }
    return NSArray(array: chain)
}

/// The `T`s in `value`: itself, or the elements of an array.
private func objects<T>(of type: T.Type, in value: CFTypeRef) -> [T] {
    if let one = value as? T { return [one] }
    if let array = value as? NSArray { return array.compactMap { $0 as? T } }
    if let array = value as? [Any] { return array.compactMap { $0 as? T } }
    return []
}
