import CBraid

/// A session-ticket encryption key in the datum form `gnutls_session_ticket_enable_server`
/// takes. GnuTLS copies it into each session, so this only has to outlive that call.
/// `@unchecked Sendable`: the bytes are written once, in `init`, and only read after.
package final class TLSTicketKey: @unchecked Sendable {
    package let datum: UnsafeMutablePointer<gnutls_datum_t>

    package init(bytes: [UInt8]) {
        let keyBytes = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        keyBytes.initialize(from: bytes, count: bytes.count)
        datum = .allocate(capacity: 1)
        datum.initialize(to: gnutls_datum_t(data: keyBytes, size: UInt32(bytes.count)))
    }

    deinit {
        datum.pointee.data.deinitialize(count: Int(datum.pointee.size))
        datum.pointee.data.deallocate()
        datum.deallocate()
    }

    /// Fresh random key bytes.
    package static func generateBytes() throws(TLSError) -> [UInt8] {
        var key = gnutls_datum_t()
        let rc = gnutls_session_ticket_key_generate(&key)
        guard rc == 0 else { throw .internalError(function: "gnutls_session_ticket_key_generate", code: rc) }
        defer { braid_gnutls_free(key.data) }
        return Array(UnsafeBufferPointer(start: key.data, count: Int(key.size)))
    }
}
