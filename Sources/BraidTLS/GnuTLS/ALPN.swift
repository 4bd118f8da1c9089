import CBraid

/// Builds the ALPN datum list GnuTLS wants and calls `body` while the bytes are alive.
package func withALPNDatums<R>(_ protocols: [String], _ body: (UnsafePointer<gnutls_datum_t>, Int) -> R) -> R {
    let encoded = protocols.map { Array($0.utf8) }
    let buffers = encoded.map { bytes -> UnsafeMutablePointer<UInt8> in
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        p.initialize(from: bytes, count: bytes.count)
        return p
    }
    defer { buffers.forEach { $0.deallocate() } }
    let datums = zip(buffers, encoded).map { gnutls_datum_t(data: $0, size: UInt32($1.count)) }
    return datums.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
}

/// The negotiated ALPN, if any.
package func negotiatedALPN(_ session: gnutls_session_t) -> String? {
    var datum = gnutls_datum_t()
    guard gnutls_alpn_get_selected_protocol(session, &datum) == 0, let data = datum.data else { return nil }
    return String(decoding: UnsafeBufferPointer(start: data, count: Int(datum.size)), as: UTF8.self)
}

/// The protocols in the body of an ALPN extension (RFC 7301 §3.1); nil if malformed.
func alpnProtocols(inExtension data: UnsafeBufferPointer<UInt8>) -> [String]? {
    guard data.count >= 2 else { return nil }
    let listLength = Int(data[0]) << 8 | Int(data[1])
    guard listLength == data.count - 2 else { return nil }
    var protocols: [String] = []
    var index = 2
    while index < data.count {
        let length = Int(data[index])
        index += 1
        guard length > 0, index + length <= data.count else { return nil }
        protocols.append(String(decoding: UnsafeBufferPointer(rebasing: data[index..<index + length]), as: UTF8.self))
        index += length
    }
    return protocols
}
