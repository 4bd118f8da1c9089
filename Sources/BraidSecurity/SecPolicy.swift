import Foundation

/// What a trust evaluation checks the certificate for (Apple's `SecPolicy`).
///
/// ```swift
/// let policy = SecPolicyCreateSSL(true, "example.com" as CFString)
/// ```
public final class SecPolicy: Sendable {
    enum Purpose: Sendable, Equatable {
        /// A TLS peer: a server's certificate (`server`) or a client's, for `hostname` if given.
        case ssl(server: Bool, hostname: String?)
        /// Any X.509 use: the chain alone.
        case basicX509
    }
    let purpose: Purpose

    init(_ purpose: Purpose) { self.purpose = purpose }
}

/// A TLS policy: `server` true evaluates a server's certificate (the client's view), for
/// `hostname` when given (nil: any name).
public func SecPolicyCreateSSL(_ server: Bool, _ hostname: CFString?) -> SecPolicy {
    SecPolicy(.ssl(server: server, hostname: hostname.map { String(describing: $0) }))
}

/// The chain alone: signatures, validity and anchors, for any use.
public func SecPolicyCreateBasicX509() -> SecPolicy {
    SecPolicy(.basicX509)
}
