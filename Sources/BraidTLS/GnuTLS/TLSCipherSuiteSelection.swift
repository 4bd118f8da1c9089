/// A list of TLS cipher suites (IANA numbers) as a GnuTLS priority fragment. GnuTLS chooses
/// by cipher, MAC and key exchange separately, not by suite: the fragment allows the union of
/// the listed suites' parts, so listing ECDHE_ECDSA with AES-128-GCM and ECDHE_RSA with
/// ChaCha20 also allows ECDHE_RSA with AES-128-GCM (never a part no listed suite has).
package enum TLSCipherSuiteSelection {
    private struct Parts {
        let cipher: String
        let mac: String
        /// Nil: a TLS 1.3 suite (no key exchange in the suite).
        let keyExchange: String?
    }

    /// The suites Braid maps, by IANA number.
    private static let known: [UInt16: Parts] = [
        0x1301: Parts(cipher: "AES-128-GCM", mac: "AEAD", keyExchange: nil),
        0x1302: Parts(cipher: "AES-256-GCM", mac: "AEAD", keyExchange: nil),
        0x1303: Parts(cipher: "CHACHA20-POLY1305", mac: "AEAD", keyExchange: nil),
        0xC02B: Parts(cipher: "AES-128-GCM", mac: "AEAD", keyExchange: "ECDHE-ECDSA"),
        0xC02C: Parts(cipher: "AES-256-GCM", mac: "AEAD", keyExchange: "ECDHE-ECDSA"),
        0xC02F: Parts(cipher: "AES-128-GCM", mac: "AEAD", keyExchange: "ECDHE-RSA"),
        0xC030: Parts(cipher: "AES-256-GCM", mac: "AEAD", keyExchange: "ECDHE-RSA"),
        0xCCA8: Parts(cipher: "CHACHA20-POLY1305", mac: "AEAD", keyExchange: "ECDHE-RSA"),
        0xCCA9: Parts(cipher: "CHACHA20-POLY1305", mac: "AEAD", keyExchange: "ECDHE-ECDSA"),
        0xC009: Parts(cipher: "AES-128-CBC", mac: "SHA1", keyExchange: "ECDHE-ECDSA"),
        0xC00A: Parts(cipher: "AES-256-CBC", mac: "SHA1", keyExchange: "ECDHE-ECDSA"),
        0xC013: Parts(cipher: "AES-128-CBC", mac: "SHA1", keyExchange: "ECDHE-RSA"),
        0xC014: Parts(cipher: "AES-256-CBC", mac: "SHA1", keyExchange: "ECDHE-RSA"),
        0xC023: Parts(cipher: "AES-128-CBC", mac: "SHA256", keyExchange: "ECDHE-ECDSA"),
        0xC027: Parts(cipher: "AES-128-CBC", mac: "SHA256", keyExchange: "ECDHE-RSA"),
        0x009C: Parts(cipher: "AES-128-GCM", mac: "AEAD", keyExchange: "RSA"),
        0x009D: Parts(cipher: "AES-256-GCM", mac: "AEAD", keyExchange: "RSA"),
        0x002F: Parts(cipher: "AES-128-CBC", mac: "SHA1", keyExchange: "RSA"),
        0x0035: Parts(cipher: "AES-256-CBC", mac: "SHA1", keyExchange: "RSA"),
        0x003C: Parts(cipher: "AES-128-CBC", mac: "SHA256", keyExchange: "RSA"),
        0x003D: Parts(cipher: "AES-256-CBC", mac: "SHA256", keyExchange: "RSA"),
    ]

    /// The priority fragment replacing NORMAL's ciphers, MACs and key exchanges (empty: keep
    /// NORMAL's). Throws for a suite GnuTLS does not offer (3DES, SHA-384 CBC suites), and
    /// when no listed suite serves any of `versions`.
    package static func priorityFragment(for suites: [UInt16], versions: [TLSVersion]) throws(TLSError) -> String {
        guard !suites.isEmpty else { return "" }
        var ciphers: [String] = [], macs: [String] = [], keyExchanges: [String] = []
        var servesTLS13 = false, servesTLS12 = false
        for suite in suites {
            guard let parts = known[suite] else {
                throw .configuration(
                    "cipher suite 0x\(String(suite, radix: 16, uppercase: true)) is not offered by GnuTLS here (Braid maps the AES-GCM, ChaCha20-Poly1305 and AES-CBC suites)")
            }
            if !ciphers.contains(parts.cipher) { ciphers.append(parts.cipher) }
            if !macs.contains(parts.mac) { macs.append(parts.mac) }
            if let keyExchange = parts.keyExchange {
                servesTLS12 = true
                if !keyExchanges.contains(keyExchange) { keyExchanges.append(keyExchange) }
            } else {
                servesTLS13 = true
            }
        }
        guard (servesTLS13 && versions.contains(.v1_3)) || (servesTLS12 && versions.contains(.v1_2)) else {
            throw .configuration("none of the cipher suites is a suite of the TLS versions allowed (\(versions.map(\.description)))")
        }
        let fragment = ["-CIPHER-ALL"] + ciphers.map { "+" + $0 } + ["-MAC-ALL"] + macs.map { "+" + $0 }
            + ["-KX-ALL"] + keyExchanges.map { "+" + $0 }
        return fragment.joined(separator: ":")
    }
}
