import BraidTLS
import CBraid

/// TLS 1.3 only, QUIC-compatible (no middlebox compatibility mode), AEADs QUIC defines, Braid's
/// elliptic-curve groups (`TLSKeyExchange`).
let quicPriority =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:"
    + TLSKeyExchange.ellipticCurveGroups

/// `quicPriority` parsed once for the whole process and referenced by every QUIC session,
/// client and server (`gnutls_priority_set_direct` built an 8 KiB cache per connection). Lives
/// as long as the process, so it outlives every session; see `TLSPriority` for why sharing
/// it across threads is safe.
let quicPriorityCache = Result { () throws(TLSError) in try TLSPriority(quicPriority) }

/// Sets QUIC's priorities on `session`: the shared cache, or the string if the cache could
/// not be built.
func setQUICPriority(on session: gnutls_session_t) -> Int32 {
    if case .success(let priority) = quicPriorityCache { return priority.set(on: session) }
    return gnutls_priority_set_direct(session, quicPriority, nil)
}

func ngtcp2ErrorName(_ code: Int32) -> String {
    String(cString: ngtcp2_strerror(code))
}

extension QUICError {
    /// The QUIC face of a failure in the shared TLS pieces (credentials, pins, anti-replay):
    /// configuration stays configuration, the rest is a TLS failure, as before they were shared.
    init(_ error: TLSError) {
        switch error {
        case .configuration(let what): self = .configuration(what)
        case .certificateRejected(let problem): self = .certificateRejected(problem)
        case .internalError(let function, let code): self = .tls("\(function): \(gnutlsErrorString(code))")
        default: self = .tls(error.description)
        }
    }
}

/// Runs `body`, turning a `TLSError` into the `QUICError` QUIC callers expect.
func mappingTLSErrors<R>(_ body: () throws -> R) throws -> R {
    do { return try body() } catch let error as TLSError { throw QUICError(error) }
}
