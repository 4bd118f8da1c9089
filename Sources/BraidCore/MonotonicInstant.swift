#if canImport(Glibc)
import Glibc
#endif

/// A point in time on a monotonic clock, in nanoseconds.
///
/// Engines never read a clock: every input carries `now`, so tests drive them on a virtual
/// clock and the datapath on `CLOCK_MONOTONIC`. Event loops and timers speak the same type.
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64

    @inlinable public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    @inlinable public static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    @inlinable public static func + (lhs: Self, rhs: Duration) -> Self {
        Self(nanoseconds: lhs.nanoseconds &+ rhs.nanosecondsClamped)
    }

    @inlinable public static func - (lhs: Self, rhs: Self) -> Duration {
        .nanoseconds(Int64(clamping: lhs.nanoseconds) - Int64(clamping: rhs.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e6) ms" }

    /// `CLOCK_MONOTONIC` now: the clock the loops and timers run on, and the one every engine
    /// input's `now` comes from.
    public static func now() -> MonotonicInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return MonotonicInstant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to zero for negative durations and to `UInt64.max` for
    /// durations longer than that (about 584 years), which would otherwise overflow.
    @inlinable package var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        let (total, carried) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return carried ? .max : total
    }
}
