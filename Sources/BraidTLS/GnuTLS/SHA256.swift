import CBraid

/// SHA-256 through GnuTLS (already linked for TLS; no second crypto library).
package enum SHA256 {
    package static let digestSize = 32

    /// The digest of `bytes`.
    package static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: digestSize)
        let rc = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { gnutls_hash_fast(GNUTLS_DIG_SHA256, input.baseAddress, input.count, $0.baseAddress) }
        }
        precondition(rc == 0, "gnutls_hash_fast(SHA-256) failed: \(rc)")
        return digest
    }

    /// The digest of `bytes` as lowercase hex, two digits a byte.
    package static func hexDigest(_ bytes: [UInt8]) -> String {
        hex(digest(bytes))
    }

    /// `bytes` as lowercase hex, two digits a byte.
    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
