import BraidCore
import CBraid

/// GnuTLS's 0-RTT anti-replay context, recording ClientHellos in a `TLSReplayFilter`. Sessions
/// hold a raw pointer to it, so whoever enables it on a session keeps this alive as long.
///
/// `@unchecked Sendable`: GnuTLS 3.7 rewrites the context's window start, unlocked, while it
/// checks a ClientHello, so sessions on different threads must hold `lock` while theirs is
/// processed (`TLSConnection` does; a QUIC endpoint keeps its own context on one thread).
package final class TLSAntiReplay: @unchecked Sendable {
    package let handle: gnutls_anti_replay_t
    /// Held while a session sharing this context across threads processes a ClientHello.
    package let lock = Locked<Void>(())
    /// Retained for the add-function's unretained pointer.
    private let filter: TLSReplayFilter

    package init(filter: TLSReplayFilter) throws(TLSError) {
        self.filter = filter
        var replay: gnutls_anti_replay_t?
        let rc = gnutls_anti_replay_init(&replay)
        guard rc == 0, let replay else { throw .internalError(function: "gnutls_anti_replay_init", code: rc) }
        handle = replay
        gnutls_anti_replay_set_ptr(replay, Unmanaged.passUnretained(filter).toOpaque())
        gnutls_anti_replay_set_add_function(replay) { pointer, expiry, key, _ in
            let filter = Unmanaged<TLSReplayFilter>.fromOpaque(pointer!).takeUnretainedValue()
            let bytes = Array(UnsafeBufferPointer(start: key!.pointee.data, count: Int(key!.pointee.size)))
            return filter.insert(key: bytes, expiry: expiry) ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    deinit { gnutls_anti_replay_deinit(handle) }
}
