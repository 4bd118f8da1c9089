import CBraid

/// Owns a `gnutls_priority_t`: a priority string parsed once (`gnutls_priority_init`) and set on
/// every session of a context with `gnutls_priority_set`, instead of `gnutls_priority_set_direct`
/// building an 8 KiB cache for each session.
///
/// Why sharing it between sessions on several threads is safe (GnuTLS 3.7, lib/priority.c): a
/// session only reads the cache; `gnutls_priority_set` takes a reference with
/// `gnutls_atomic_increment(&priority->usage_cnt)`, and `gnutls_deinit` drops it through
/// `gnutls_priority_deinit`, which decrements atomically while references remain and frees the
/// cache only when the count is already 0, i.e. at the owner's own `gnutls_priority_deinit` once
/// every session is gone (its comment: "Multiple sessions or different threads holding a
/// reference + a global reference"). The manual (Thread safety) allows read-only access to an
/// object from any thread. This object is that global reference: the cache never changes after
/// `init`, and every connection keeps its context (and so this object) alive until its session
/// is deinitialized. Hence `@unchecked Sendable`.
package final class TLSPriority: @unchecked Sendable {
    package let handle: gnutls_priority_t
    /// The priority string it was parsed from.
    package let string: String

    package init(_ string: String) throws(TLSError) {
        var handle: gnutls_priority_t?
        let rc = gnutls_priority_init(&handle, string, nil)
        guard rc == 0, let handle else { throw .internalError(function: "gnutls_priority_init", code: rc) }
        self.handle = handle
        self.string = string
    }

    deinit { gnutls_priority_deinit(handle) }

    /// Sets this priority cache on `session` (no copy: the session holds a reference).
    package func set(on session: gnutls_session_t) -> Int32 {
        gnutls_priority_set(session, handle)
    }
}
