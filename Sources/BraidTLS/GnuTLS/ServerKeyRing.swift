import BraidCore
import CBraid

/// Secrets a fleet of servers shares so that whichever server a client reaches accepts what
/// another server gave it: session tickets (resumption and 0-RTT), address tokens (Retry and
/// NEW_TOKEN) and stateless resets. Each generation is one secret from which the three keys
/// derive (HKDF-SHA256), so an operator distributes one line per generation.
///
/// Rotation without restart: the first generation mints (new tickets, tokens, reset tokens);
/// every listed generation is accepted; a generation that leaves the list stays accepted for
/// `overlap` after the ring learns it left, then is refused. The usual rotation: add the new
/// secret second on every server, then move it first, then drop the old one.
///
/// Thread-safe: endpoints on every loop read it, the owner updates it from anywhere.
package final class ServerKeyRing: Sendable {
    /// One secret's keys.
    package final class Generation: Sendable {
        /// Behind Retry and NEW_TOKEN tokens (ngtcp2's token secret).
        package let tokenSecret: [UInt8]
        /// Behind stateless reset tokens.
        package let resetSecret: [UInt8]
        /// GnuTLS's 64-byte session-ticket master key.
        package let ticketKey: TLSTicketKey
        package let ticketKeyBytes: [UInt8]
        let secret: [UInt8]

        init(secret: [UInt8]) throws(TLSError) {
            self.secret = secret
            tokenSecret = try Self.derive(secret, label: "braid token", count: 32)
            resetSecret = try Self.derive(secret, label: "braid stateless reset", count: 32)
            ticketKeyBytes = try Self.derive(secret, label: "braid session ticket", count: 64)
            ticketKey = TLSTicketKey(bytes: ticketKeyBytes)
        }

        /// A generation whose token and reset secrets are `staticSecret` itself and whose ticket
        /// key is random (a single server's keys, as before fleets).
        init(staticSecret: [UInt8]) throws(TLSError) {
            secret = staticSecret
            tokenSecret = staticSecret
            resetSecret = staticSecret
            ticketKeyBytes = try TLSTicketKey.generateBytes()
            ticketKey = TLSTicketKey(bytes: ticketKeyBytes)
        }

        /// HKDF-Extract (no salt) then HKDF-Expand with `label`.
        private static func derive(_ secret: [UInt8], label: String, count: Int) throws(TLSError) -> [UInt8] {
            var secret = secret
            var info = Array(label.utf8)
            var prk = [UInt8](repeating: 0, count: 32)
            var output = [UInt8](repeating: 0, count: count)
            let rc = secret.withUnsafeMutableBytes { secretRaw in
                var key = gnutls_datum_t(data: secretRaw.baseAddress!.assumingMemoryBound(to: UInt8.self), size: UInt32(secretRaw.count))
                var extracted = gnutls_hkdf_extract(GNUTLS_MAC_SHA256, &key, nil, &prk)
                guard extracted == 0 else { return extracted }
                extracted = prk.withUnsafeMutableBytes { prkRaw in
                    info.withUnsafeMutableBytes { infoRaw in
                        var prkDatum = gnutls_datum_t(data: prkRaw.baseAddress!.assumingMemoryBound(to: UInt8.self), size: 32)
                        var infoDatum = gnutls_datum_t(data: infoRaw.baseAddress!.assumingMemoryBound(to: UInt8.self), size: UInt32(infoRaw.count))
                        return gnutls_hkdf_expand(GNUTLS_MAC_SHA256, &prkDatum, &infoDatum, &output, count)
                    }
                }
                return extracted
            }
            guard rc == 0 else { throw .internalError(function: "gnutls_hkdf", code: rc) }
            return output
        }
    }

    private struct State {
        var listed: [Generation]
        /// Generations no longer listed, with when they stop being accepted.
        var leaving: [(generation: Generation, until: MonotonicInstant)] = []
    }

    /// How long a generation stays accepted after it leaves the list.
    package let overlap: Duration
    private let state: Locked<State>

    /// A ring of `secrets` (each at least 16 bytes; the first mints).
    package init(secrets: [[UInt8]], overlap: Duration) throws(TLSError) {
        self.overlap = overlap
        state = Locked(State(listed: try Self.generations(secrets)))
    }

    /// A single generation from a static secret (see `Generation.init(staticSecret:)`).
    package init(staticSecret: [UInt8]) throws(TLSError) {
        overlap = .zero
        state = Locked(State(listed: [try Generation(staticSecret: staticSecret)]))
    }

    private static func generations(_ secrets: [[UInt8]]) throws(TLSError) -> [Generation] {
        guard !secrets.isEmpty else { throw .configuration("a key ring needs at least one secret") }
        var generations: [Generation] = []
        for secret in secrets {
            guard secret.count >= 16 else { throw .configuration("a fleet secret needs at least 16 bytes, not \(secret.count)") }
            generations.append(try Generation(secret: secret))
        }
        return generations
    }

    /// Replaces the list; generations that left stay accepted until `now + overlap`.
    package func update(secrets: [[UInt8]], now: MonotonicInstant) throws(TLSError) {
        let fresh = try Self.generations(secrets)
        state.withLock { state in
            var reused: [Generation] = []
            for generation in fresh {
                // Keep the existing object (its ticket key may be referenced) for a known secret.
                let known = state.listed.first { $0.secret == generation.secret }
                    ?? state.leaving.first { $0.generation.secret == generation.secret }?.generation
                reused.append(known ?? generation)
            }
            let keptSecrets = Set(reused.map(\.secret))
            state.leaving.removeAll { keptSecrets.contains($0.generation.secret) }
            for old in state.listed where !keptSecrets.contains(old.secret) {
                state.leaving.append((old, now + overlap))
            }
            state.listed = reused
        }
    }

    /// The generation that mints.
    package var current: Generation { state.withLock { $0.listed[0] } }

    /// Every generation accepted at `now`, the minting one first, then the others listed, then
    /// those leaving (most recently left first).
    package func accepted(at now: MonotonicInstant) -> [Generation] {
        state.withLock { state in
            state.leaving.removeAll { !(now < $0.until) }
            return state.listed + state.leaving.reversed().map(\.generation)
        }
    }

    /// Parses a key file: one secret per line in hex (at least 32 hex digits), the minting one
    /// first; blank lines and lines starting with `#` are ignored.
    package static func parseKeyFile(_ text: String) throws(TLSError) -> [[UInt8]] {
        var secrets: [[UInt8]] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard line.count % 2 == 0, line.count >= 32, let bytes = hexBytes(line) else {
                throw .configuration("key file line \(number + 1): expected a secret of at least 32 hex digits")
            }
            secrets.append(bytes)
        }
        guard !secrets.isEmpty else { throw .configuration("the key file has no secret") }
        return secrets
    }

    private static func hexBytes(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first.isWhitespace { result.removeFirst() }
        while let last = result.last, last.isWhitespace { result.removeLast() }
        return result
    }
}
