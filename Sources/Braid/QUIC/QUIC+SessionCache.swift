import BraidCore
import BraidQUIC
import BraidTLS
import Foundation

extension QUIC {
    /// Resumption tickets per server, in memory or in a file, so later connections resume
    /// (one round trip less) and may carry 0-RTT data. One cache serves QUIC and TLS
    /// connections alike (`TLS.SessionCache` is this type); their tickets are kept apart.
    ///
    /// ```swift
    /// let cache = try QUIC.SessionCache(file: "/var/cache/myapp/quic-tickets")
    /// let connection = NetworkConnection(to: endpoint) { QUIC(alpn: ["echo"]).sessionCache(cache) }
    /// ```
    public final class SessionCache: Sendable {
        /// Serialized tickets by key: QUIC's by "server:port", TLS's by "tls:server:port". Parsed
        /// when taken, since a file's contents are untrusted input.
        private let tickets = Locked<[String: [UInt8]]>([:])
        private let file: String?

        /// An in-memory cache.
        public init() { file = nil }

        /// A cache kept in `file` (created if missing, readable by its owner only: tickets hold
        /// session secrets). Each entry carries a SHA-256 digest, and an entry that does not
        /// match it, or a file in another format, is ignored: a corrupted ticket would otherwise
        /// reach GnuTLS, which does not survive every corrupted session. The digest guards
        /// against corruption, not against someone who can write the file: keep it as private
        /// as the program's own files.
        public init(file: String) throws {
            self.file = file
            guard FileManager.default.fileExists(atPath: file) else { return }
            guard let data = FileManager.default.contents(atPath: file) else {
                throw NetworkError.invalidConfiguration("cannot read the session cache file \(file)")
            }
            tickets.withLock { $0 = Self.decode([UInt8](data)) }
        }

        /// How many servers have a ticket.
        public var count: Int { tickets.withLock { $0.count } }

        /// Removes and returns the QUIC ticket for `key` (tickets are used once).
        func take(_ key: String) -> QUICResumptionTicket? {
            takeBytes(key).flatMap(QUICResumptionTicket.init(serialized:))
        }

        func store(_ ticket: QUICResumptionTicket, for key: String) {
            storeBytes(ticket.serialized(), for: key)
        }

        /// Removes and returns the TLS ticket for `key` (tickets are used once).
        func takeTLS(_ key: String) -> TLSSessionTicket? {
            takeBytes(key).flatMap(TLSSessionTicket.init(serialized:))
        }

        func storeTLS(_ ticket: TLSSessionTicket, for key: String) {
            storeBytes(ticket.serialized(), for: key)
        }

        private func takeBytes(_ key: String) -> [UInt8]? {
            let bytes = tickets.withLock { $0.removeValue(forKey: key) }
            if bytes != nil { save() }
            return bytes
        }

        private func storeBytes(_ bytes: [UInt8], for key: String) {
            tickets.withLock { $0[key] = bytes }
            save()
        }

        private func save() {
            guard let file else { return }
            let bytes = tickets.withLock { Self.encode($0) }
            // Written whole to a private file, then renamed, so a crash never leaves half a file.
            let temporary = file + ".\(UUID().uuidString).tmp"
            let fd = open(temporary, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            if written == bytes.count { rename(temporary, file) } else { unlink(temporary) }
        }

        /// The file format's first bytes ("Braid session cache", version 1).
        static let magic = Array("BSC1".utf8)

        /// `magic`, then per entry: key length, key, ticket length, ticket (lengths UInt32
        /// big-endian), and the SHA-256 of the key and ticket bytes.
        static func encode(_ tickets: [String: [UInt8]]) -> [UInt8] {
            var out = magic
            func put(_ bytes: [UInt8]) {
                withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out.append(contentsOf: $0) }
                out.append(contentsOf: bytes)
            }
            for (key, ticket) in tickets.sorted(by: { $0.key < $1.key }) {
                put(Array(key.utf8))
                put(ticket)
                out.append(contentsOf: SHA256.digest(Array(key.utf8) + ticket))
            }
            return out
        }

        /// The entries of `bytes` whose digest matches; nothing if it is not this format.
        static func decode(_ bytes: [UInt8]) -> [String: [UInt8]] {
            guard bytes.starts(with: magic) else { return [:] }
            var result: [String: [UInt8]] = [:]
            var offset = magic.count
            func take() -> [UInt8]? {
                guard offset + 4 <= bytes.count else { return nil }
                let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                offset += 4
                guard length <= bytes.count - offset else { return nil }
                defer { offset += length }
                return Array(bytes[offset..<offset + length])
            }
            while let key = take(), let ticket = take(), offset + SHA256.digestSize <= bytes.count {
                let digest = Array(bytes[offset..<offset + SHA256.digestSize])
                offset += SHA256.digestSize
                guard digest == SHA256.digest(key + ticket) else { continue }
                result[String(decoding: key, as: UTF8.self)] = ticket
            }
            return result
        }
    }
}
