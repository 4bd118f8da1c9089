import BraidSecurity
import Dispatch
import Foundation

/// The peer's public key in Apple's external form (RSA: PKCS #1; EC: the uncompressed point),
/// or nil when the metadata has no certificate of the peer.
public func sec_protocol_metadata_copy_peer_public_key(_ metadata: sec_protocol_metadata_t) -> DispatchData? {
    guard let leaf = metadata.peerCertificates.first.flatMap(SecCertificate.init(der:)),
        let key = SecCertificateCopyKey(leaf), let bytes = SecKeyCopyExternalRepresentation(key, nil)
    else { return nil }
    return (bytes as Data).withUnsafeBytes { DispatchData(bytes: $0) }
}

/// Calls `handler` with each of the peer's certificates, leaf first; false when the metadata
/// has none (a resumed session).
@discardableResult
public func sec_protocol_metadata_access_peer_certificate_chain(
    _ metadata: sec_protocol_metadata_t, _ handler: (sec_certificate_t) -> Void
) -> Bool {
    let certificates = metadata.peerCertificates.compactMap(SecCertificate.init(der:))
    guard !certificates.isEmpty else { return false }
    for certificate in certificates {
        if let wrapped = sec_certificate_create(certificate) { handler(wrapped) }
    }
    return true
}

/// The TLS version agreed.
public func sec_protocol_metadata_get_negotiated_tls_protocol_version(_ metadata: sec_protocol_metadata_t) -> tls_protocol_version_t {
    metadata.negotiatedVersion ?? .TLSv12
}

/// The server name the client asked for (SNI), or nil.
public func sec_protocol_metadata_get_server_name(_ metadata: sec_protocol_metadata_t) -> UnsafePointer<CChar>? {
    UnsafePointer(metadata.serverName)
}
