import BraidTLS
import BraidTLSIO
import Foundation

extension NWProtocolTLS {
    /// What a ready TLS connection agreed (`NWConnection.metadata(definition:)` with
    /// `NWProtocolTLS.definition`), read through the `sec_protocol_metadata_*` functions.
    ///
    /// ```swift
    /// if let tls = connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata,
    ///    let alpn = sec_protocol_metadata_get_negotiated_protocol(tls.securityProtocolMetadata) {
    ///     print("speaking \(String(cString: alpn))")
    /// }
    /// ```
    public final class Metadata: NWProtocolMetadata, @unchecked Sendable {
        /// The agreed parameters.
        public let securityProtocolMetadata: sec_protocol_metadata_t

        init(negotiatedProtocol: String?, serverName: String?, negotiatedVersion: TLSProtocolVersion?, peerCertificates: [[UInt8]]) {
            securityProtocolMetadata = sec_protocol_metadata_t(
                negotiatedProtocol: negotiatedProtocol, serverName: serverName, negotiatedVersion: negotiatedVersion,
                peerCertificates: peerCertificates)
        }

        override var definition: NWProtocolDefinition? { NWProtocolTLS.definition }
    }
}

/// What a TLS connection agreed (Apple's `sec_protocol_metadata_t`).
///
/// `@unchecked Sendable`: its C strings are written once, in `init`, and only read after.
public final class sec_protocol_metadata: @unchecked Sendable {
    /// The agreed application protocol as a C string of its own, freed with the metadata (the
    /// pointer `sec_protocol_metadata_get_negotiated_protocol` returns is this one).
    let negotiatedProtocol: UnsafeMutablePointer<CChar>?
    /// The name the client asked for, likewise.
    let serverName: UnsafeMutablePointer<CChar>?
    let negotiatedVersion: TLSProtocolVersion?
    /// The peer's certificates, leaf first, DER (empty when not known: after resumption).
    let peerCertificates: [[UInt8]]

    init(negotiatedProtocol: String?, serverName: String? = nil, negotiatedVersion: TLSProtocolVersion? = nil, peerCertificates: [[UInt8]] = []) {
        self.negotiatedProtocol = negotiatedProtocol.map(Self.cString)
        self.serverName = serverName.map(Self.cString)
        self.negotiatedVersion = negotiatedVersion
        self.peerCertificates = peerCertificates
    }

    /// What a verify block is told of the handshake.
    convenience init(peer: TLSPeerFacts) {
        self.init(
            negotiatedProtocol: peer.negotiatedALPN, serverName: peer.serverName.isEmpty ? nil : peer.serverName,
            negotiatedVersion: peer.negotiatedVersion.map(TLSProtocolVersion.init), peerCertificates: peer.certificateChain)
    }

    private static func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        let characters = Array(string.utf8CString)
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: characters.count)
        copy.initialize(from: characters, count: characters.count)
        return copy
    }

    deinit {
        negotiatedProtocol?.deallocate()
        serverName?.deallocate()
    }
}

/// Apple's name for the agreed TLS parameters.
public typealias sec_protocol_metadata_t = sec_protocol_metadata

/// The application protocol (ALPN) both ends agreed on, or nil if none was. The string lives
/// as long as `metadata`.
public func sec_protocol_metadata_get_negotiated_protocol(_ metadata: sec_protocol_metadata_t) -> UnsafePointer<CChar>? {
    UnsafePointer(metadata.negotiatedProtocol)
}
