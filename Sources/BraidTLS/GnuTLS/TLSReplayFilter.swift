import BraidCore
import Glibc

/// Remembers 0-RTT ClientHellos until they expire so a replayed one is refused (RFC 8446 §8).
/// Servers on several threads may share one.
///
/// Bounded: at most `capacity` unexpired entries. A full filter refuses the next ClientHello's
/// early data (the handshake goes on in 1-RTT), which is safe, instead of growing with the rate
/// of resumption attempts. Expired entries are swept when the count doubles since the last
/// sweep (at most once a second), so an insert costs O(1) amortized, never a walk of the table.
package final class TLSReplayFilter: Sendable {
    package static let capacity = 65_536

    private struct State {
        var seen: [[UInt8]: time_t] = [:]
        var sweepAt = 1024
        var lastSweep: time_t = 0
    }

    private let state = Locked(State())

    package init() {}

    /// False if `key` was already seen and has not expired, or the filter is full.
    package func insert(key: [UInt8], expiry: time_t) -> Bool {
        insert(key: key, expiry: expiry, now: time(nil))
    }

    package func insert(key: [UInt8], expiry: time_t, now: time_t) -> Bool {
        state.withLock { state in
            if state.seen.count >= state.sweepAt && now != state.lastSweep {
                state.seen = state.seen.filter { $0.value > now }
                state.lastSweep = now
                state.sweepAt = min(max(1024, state.seen.count * 2), Self.capacity)
            }
            if let existing = state.seen[key], existing > now { return false }
            guard state.seen.count < Self.capacity else { return false }
            state.seen[key] = expiry
            return true
        }
    }

    /// Entries held now (tests check the bound).
    package var count: Int { state.withLock { $0.seen.count } }
}
