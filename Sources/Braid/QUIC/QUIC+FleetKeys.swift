import BraidIO
import BraidTLS
import Foundation

extension QUIC {
    /// Secrets that several QUIC listeners (on one host or many) share, so that whichever of
    /// them a client reaches accepts what another gave it: session tickets (resumption and
    /// 0-RTT), Retry and NEW_TOKEN address tokens, and stateless resets. Network.framework has
    /// no such option; set it with `QUIC.fleetKeys(_:)`, and on TLS listeners, for their session
    /// tickets, with `TLS.fleetKeys(_:)`.
    ///
    /// Each generation is one secret (at least 16 bytes; the three keys derive from it). The
    /// first generation mints; every listed one is accepted; one that leaves the list is still
    /// accepted for `overlap`, then refused. Rotate without a restart: add the new secret second
    /// everywhere, then move it first, then remove the old one, calling `reload()` (or
    /// `update(secrets:)`) after each step.
    ///
    /// ```swift
    /// let keys = try QUIC.FleetKeys(contentsOfFile: "/etc/braid/quic-keys", overlap: .seconds(3600))
    /// let listener = NetworkListener(port: 4433) {
    ///     QUIC(alpn: ["h3"])
    ///         .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    ///         .fleetKeys(keys)
    /// }
    /// ```
    ///
    /// The key file holds one secret per line in hex (at least 32 digits), the minting one
    /// first; blank lines and lines starting with `#` are ignored.
    public final class FleetKeys: Sendable {
        package let ring: ServerKeyRing
        /// The key file `reload()` reads, if the keys came from one.
        public let file: String?

        /// Keys from secrets in memory, the minting one first.
        public init(secrets: [Data], overlap: Duration = .seconds(3600)) throws {
            ring = try Self.mapping { try ServerKeyRing(secrets: secrets.map(Array.init), overlap: overlap) }
            file = nil
        }

        /// Keys from a key file.
        public init(contentsOfFile path: String, overlap: Duration = .seconds(3600)) throws {
            let secrets = try Self.read(path)
            ring = try Self.mapping { try ServerKeyRing(secrets: secrets, overlap: overlap) }
            file = path
        }

        /// Replaces the generations; one no longer listed stays accepted for `overlap`.
        public func update(secrets: [Data]) throws {
            try Self.mapping { try ring.update(secrets: secrets.map(Array.init), now: monotonicNow()) }
        }

        /// Reads the key file again (for example on SIGHUP); a file that does not parse leaves
        /// the keys as they were and throws.
        public func reload() throws {
            guard let file else { throw NetworkError.invalidConfiguration("these fleet keys were not loaded from a file") }
            let secrets = try Self.read(file)
            try Self.mapping { try ring.update(secrets: secrets, now: monotonicNow()) }
        }

        private static func read(_ path: String) throws -> [[UInt8]] {
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw NetworkError.invalidConfiguration("cannot read the fleet key file \(path): \(error.localizedDescription)")
            }
            return try mapping { try ServerKeyRing.parseKeyFile(text) }
        }

        private static func mapping<T>(_ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch {
                throw NetworkError.invalidConfiguration("fleet keys: \(error)")
            }
        }
    }

    /// Listener: share tickets, tokens and stateless resets with the other listeners holding
    /// the same keys (default: keys of this listener alone).
    public func fleetKeys(_ keys: FleetKeys) -> QUIC { with { $0.fleetKeys = keys } }
}
