import Foundation

// Apple's Security functions take and return Core Foundation types, which Foundation on Linux
// does not export. Their toll-free-bridged Foundation classes stand in, so the casts Apple's
// examples write (`data as CFData`, `certificates as CFArray`, `error as Error`) compile and
// mean the same.

/// Core Foundation's bytes: Foundation's `NSData` (`Data` casts to and from it with `as`).
public typealias CFData = NSData
/// Core Foundation's array: Foundation's `NSArray`.
public typealias CFArray = NSArray
/// Core Foundation's dictionary: Foundation's `NSDictionary`.
public typealias CFDictionary = NSDictionary
/// Core Foundation's string: Foundation's `NSString`.
public typealias CFString = NSString
/// Core Foundation's error: Foundation's `NSError` (an `Error`).
public typealias CFError = NSError
/// Core Foundation's index and count type.
public typealias CFIndex = Int
/// Any Core Foundation object.
public typealias CFTypeRef = AnyObject

/// Core Foundation's allocators, which the Security functions accept and Braid does not need:
/// pass `nil` or `kCFAllocatorDefault`.
public final class CFAllocator: Sendable {
    private init() {}
}

/// The default allocator (nil: Braid allocates as Swift does).
public let kCFAllocatorDefault: CFAllocator? = nil

/// A Security framework result code: 0 (`errSecSuccess`) or a negative error.
public typealias OSStatus = Int32

/// No error.
public let errSecSuccess: OSStatus = 0
/// A parameter was not valid (an empty or malformed input).
public let errSecParam: OSStatus = -50
/// The data could not be decoded (not DER, not a certificate, not PKCS #12).
public let errSecDecode: OSStatus = -26275
/// The PKCS #12 passphrase was wrong.
public let errSecAuthFailed: OSStatus = -25293
/// The certificate chain does not lead to a trusted anchor.
public let errSecNotTrusted: OSStatus = -67843
/// A certificate in the chain has expired or is not yet valid.
public let errSecCertificateExpired: OSStatus = -67818
/// The certificate does not carry the name the policy asks for.
public let errSecHostNameMismatch: OSStatus = -67602
/// A certificate in the chain was revoked or is otherwise unusable.
public let errSecInvalidCertificateRef: OSStatus = -67690
/// The function is not available on this platform.
public let errSecUnimplemented: OSStatus = -4

/// The domain of the `CFError`s the Security functions give: the code is an `OSStatus`.
public let NSOSStatusErrorDomain = "NSOSStatusErrorDomain"
