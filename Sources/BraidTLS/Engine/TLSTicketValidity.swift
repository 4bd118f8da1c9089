#if canImport(Glibc)
import Glibc
#endif

/// When a TLS 1.3 session ticket stops being usable: the wall-clock time it arrived and the
/// ticket_lifetime the server gave it (RFC 8446 §4.6.1).
///
/// GnuTLS 3.7 drops a stale ticket itself while it writes the ClientHello (older than its
/// lifetime, or arrived "in the future" after the clock moved back), but by then the
/// early_data extension, written before pre_shared_key, has already promised 0-RTT: with no
/// PSK left to derive the early keys from, the handshake fails instead of falling back to a
/// full one. So a client checks a ticket's age before handing it to GnuTLS, and leaves a ticket
/// near its end unused, as the handshake may start a little later than the check.
package struct TLSTicketValidity: Sendable, Hashable {
    /// Wall-clock milliseconds since 1970 when the ticket arrived (CLOCK_REALTIME, as GnuTLS).
    package var arrival: UInt64
    /// The server's ticket_lifetime, in seconds.
    package var lifetime: UInt32

    package init(arrival: UInt64, lifetime: UInt32) {
        self.arrival = arrival
        self.lifetime = lifetime
    }

    /// A ticket arriving now with the lifetime its NewSessionTicket message states (nil for a
    /// message too short to hold one).
    package init?(newSessionTicket message: UnsafeBufferPointer<UInt8>, now: UInt64 = TLSTicketValidity.wallClock()) {
        guard message.count >= 4 else { return nil }
        lifetime = (0..<4).reduce(0) { $0 << 8 | UInt32(message[$1]) }
        arrival = now
    }

    /// How long before the end of its lifetime a ticket is no longer used: half the lifetime,
    /// at most a minute (the handshake that offers it may start that much after the check).
    package var margin: UInt64 { min(60_000, UInt64(lifetime) * 500) }

    /// True if a handshake starting about `now` (wall-clock milliseconds) may offer the ticket:
    /// it has not arrived in the future and more than `margin` of its lifetime remains.
    package func isUsable(at now: UInt64 = TLSTicketValidity.wallClock()) -> Bool {
        guard now >= arrival else { return false }
        return now - arrival + margin < UInt64(lifetime) * 1000
    }

    /// True once GnuTLS itself no longer offers the ticket (its age in whole seconds exceeds
    /// its lifetime, or it arrived in the future).
    package func isExpiredForGnuTLS(at now: UInt64 = TLSTicketValidity.wallClock()) -> Bool {
        now < arrival || (now - arrival) / 1000 > UInt64(lifetime)
    }

    /// Wall-clock milliseconds since 1970.
    package static func wallClock() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(max(0, spec.tv_sec)) * 1000 + UInt64(max(0, spec.tv_nsec)) / 1_000_000
    }
}
