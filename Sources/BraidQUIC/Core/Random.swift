import CBraid

/// Fills `buffer` with cryptographically strong random bytes (GnuTLS's nonce generator).
func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
    guard buffer.count > 0 else { return }
    let rc = gnutls_rnd(GNUTLS_RND_NONCE, buffer.baseAddress, buffer.count)
    precondition(rc == 0, "GnuTLS random generator failed (\(rc))")
}

func fillRandom(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { fillRandom($0) }
}
