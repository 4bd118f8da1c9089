import Glibc
import Synchronization

/// Remembers 0-RTT ClientHellos until they expire so a replayed one is refused (RFC 8446 §8).
/// Servers on several threads may share one.
package final class TLSReplayFilter: Sendable {
    private let seen = Mutex<[[UInt8]: time_t]>([:])

    package init() {}

    /// False if `key` was already seen and has not expired.
    package func insert(key: [UInt8], expiry: time_t) -> Bool {
        let now = time(nil)
        return seen.withLock { seen in
            if seen.count > 1024 { seen = seen.filter { $0.value > now } }
            if let existing = seen[key], existing > now { return false }
            seen[key] = expiry
            return true
        }
    }
}
