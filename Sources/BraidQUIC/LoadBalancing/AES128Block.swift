import CBraid

/// AES-128 on single 16-byte blocks (what QUIC-LB calls AES-128-ECB), through GnuTLS.
///
/// GnuTLS 3.7 offers no ECB mode, so each block is CBC with a zero IV, which for one block is
/// exactly the block cipher. One instance belongs to one thread (GnuTLS cipher handles are not
/// safe to share).
final class AES128Block {
    private let handle: gnutls_cipher_hd_t
    private var zeroIV = [UInt8](repeating: 0, count: 16)

    /// - Parameter key: exactly 16 bytes.
    init(key: [UInt8]) throws(QUICError) {
        guard key.count == 16 else { throw .configuration("an AES-128 key has 16 bytes, not \(key.count)") }
        var keyBytes = key
        var iv = [UInt8](repeating: 0, count: 16)
        var created: gnutls_cipher_hd_t?
        let rc = keyBytes.withUnsafeMutableBytes { keyRaw in
            iv.withUnsafeMutableBytes { ivRaw in
                var keyDatum = gnutls_datum_t(data: keyRaw.baseAddress!.assumingMemoryBound(to: UInt8.self), size: 16)
                var ivDatum = gnutls_datum_t(data: ivRaw.baseAddress!.assumingMemoryBound(to: UInt8.self), size: 16)
                return gnutls_cipher_init(&created, GNUTLS_CIPHER_AES_128_CBC, &keyDatum, &ivDatum)
            }
        }
        guard rc == 0, let created else { throw .tls("AES-128 cipher: \(gnutlsErrorString(rc))") }
        handle = created
    }

    deinit { gnutls_cipher_deinit(handle) }

    /// The encryption of one 16-byte block.
    func encrypt(_ block: [UInt8]) -> [UInt8] { run(block, encrypting: true) }

    /// The decryption of one 16-byte block.
    func decrypt(_ block: [UInt8]) -> [UInt8] { run(block, encrypting: false) }

    private func run(_ block: [UInt8], encrypting: Bool) -> [UInt8] {
        precondition(block.count == 16, "AES works on 16-byte blocks")
        var output = [UInt8](repeating: 0, count: 16)
        let rc = zeroIV.withUnsafeMutableBytes { iv in
            gnutls_cipher_set_iv(handle, iv.baseAddress, 16)
            return block.withUnsafeBytes { input in
                output.withUnsafeMutableBytes { out in
                    encrypting
                        ? gnutls_cipher_encrypt2(handle, input.baseAddress, 16, out.baseAddress, 16)
                        : gnutls_cipher_decrypt2(handle, input.baseAddress, 16, out.baseAddress, 16)
                }
            }
        }
        // Only a wrong length can fail, and the length is checked above.
        precondition(rc == 0, "GnuTLS AES block operation failed (\(rc))")
        return output
    }
}
