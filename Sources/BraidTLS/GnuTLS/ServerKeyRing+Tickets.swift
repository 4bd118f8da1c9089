#if canImport(Glibc)
import Glibc
#endif
import BraidCore
import CBraid

/// Which generation a resuming client's ticket was sealed under, so a session can be given
/// that generation's key before GnuTLS opens the ticket (GnuTLS takes one ticket key per
/// session).
///
/// GnuTLS 3.7 never seals tickets with the master key itself: it derives a key for each time
/// step (SHA3-512 of the step number, 8 bytes big-endian, then the master key; a step lasts
/// three session lifetimes, 18 hours by default) and starts each ticket with the first 16
/// bytes of that key, its name; it opens tickets of the current and the previous step. The
/// names are computed here the same way and compared with the ticket's first 16 bytes. A
/// ticket that matches nothing leaves the session with the minting key, and GnuTLS then does a
/// full handshake, as for any unknown ticket.
extension ServerKeyRing {
    /// GnuTLS's session lifetime (DEFAULT_EXPIRE_TIME) times its steps per rotation period.
    static let ticketKeyStep: UInt64 = 21_600 * 3

    /// The accepted generation whose ticket keys name `ticket`, if any.
    package func generation(forTicket ticket: [UInt8], now: MonotonicInstant, wallClock: UInt64? = nil) -> Generation? {
        guard ticket.count >= 16 else { return nil }
        let name = Array(ticket.prefix(16))
        let step = (wallClock ?? UInt64(max(0, time(nil)))) / Self.ticketKeyStep
        for generation in accepted(at: now) {
            for candidate in [step, step &- 1] where Self.keyName(master: generation.ticketKeyBytes, step: candidate) == name {
                return generation
            }
        }
        return nil
    }

    private static func keyName(master: [UInt8], step: UInt64) -> [UInt8] {
        let input = withUnsafeBytes(of: step.bigEndian, Array.init) + master
        var digest = [UInt8](repeating: 0, count: 64)
        let rc = gnutls_hash_fast(GNUTLS_DIG_SHA3_512, input, input.count, &digest)
        return rc == 0 ? Array(digest.prefix(16)) : []
    }

    /// Points `session` (a server session whose ClientHello GnuTLS is about to process) at the
    /// ticket key of the generation that sealed the client's ticket, when that is not the one
    /// it has. Call from a ClientHello pre-hook with the message body.
    package func selectTicketKey(for session: gnutls_session_t, clientHello: UnsafeRawBufferPointer, now: MonotonicInstant) {
        guard let ticket = Self.firstPSKIdentity(inClientHello: clientHello),
            let generation = generation(forTicket: ticket, now: now), generation !== current
        else { return }
        // Before the ClientHello is processed GnuTLS has derived no ticket key yet, so it takes
        // a new master key.
        _ = gnutls_session_ticket_enable_server(session, generation.ticketKey.datum)
    }

    /// The first identity of a ClientHello's pre_shared_key extension (RFC 8446 §4.2.11).
    package static func firstPSKIdentity(inClientHello body: UnsafeRawBufferPointer) -> [UInt8]? {
        var reader = HelloReader(body)
        guard reader.skip(2 + 32), reader.skipVector(lengthBytes: 1), reader.skipVector(lengthBytes: 2),
            reader.skipVector(lengthBytes: 1), let extensionsLength = reader.read(2)
        else { return nil }
        let end = reader.index + extensionsLength
        while reader.index + 4 <= end {
            guard let type = reader.read(2), let length = reader.read(2) else { return nil }
            guard type == 41 else {
                guard reader.skip(length) else { return nil }
                continue
            }
            guard reader.read(2) != nil, let identityLength = reader.read(2) else { return nil }
            return reader.bytes(identityLength)
        }
        return nil
    }

    /// Bounds-checked big-endian reads over a handshake message.
    private struct HelloReader {
        let body: UnsafeRawBufferPointer
        var index = 0

        init(_ body: UnsafeRawBufferPointer) { self.body = body }

        mutating func read(_ count: Int) -> Int? {
            guard body.count - index >= count else { return nil }
            defer { index += count }
            return body[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
        }

        mutating func skip(_ count: Int) -> Bool {
            guard body.count - index >= count else { return false }
            index += count
            return true
        }

        mutating func skipVector(lengthBytes: Int) -> Bool {
            guard let length = read(lengthBytes) else { return false }
            return skip(length)
        }

        mutating func bytes(_ count: Int) -> [UInt8]? {
            guard body.count - index >= count else { return nil }
            defer { index += count }
            return Array(body[index..<index + count])
        }
    }
}
