import CBraid
import Foundation

/// The passphrase a PKCS #12 file is opened with (a `String` in `SecPKCS12Import`'s options).
public var kSecImportExportPassphrase: CFString { "passphrase" }
/// An imported item's identity (`SecIdentity`).
public var kSecImportItemIdentity: CFString { "identity" }
/// An imported item's certificate chain (an array of `SecCertificate`, leaf first).
public var kSecImportItemCertChain: CFString { "chain" }
/// An imported item's trust (`SecTrust` over its chain, basic X.509 policy).
public var kSecImportItemTrust: CFString { "trust" }
/// An imported item's label (the certificate's subject summary).
public var kSecImportItemLabel: CFString { "label" }

/// Opens a PKCS #12 file (its DER bytes) with the options' `kSecImportExportPassphrase`, and
/// gives one item: a dictionary with its identity, chain, trust and label. Returns
/// `errSecAuthFailed` for a wrong passphrase and `errSecDecode` for bytes that are not PKCS #12.
///
/// ```swift
/// let p12 = try Data(contentsOf: URL(fileURLWithPath: "server.p12"))
/// var items: CFArray?
/// let status = SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "secret"] as CFDictionary, &items)
/// if status == errSecSuccess, let first = (items as? [[String: Any]])?.first,
///    let identity = first[kSecImportItemIdentity as String] as! SecIdentity? {
///     let tls = sec_identity_create(identity)
///     print(tls != nil)
/// }
/// ```
@discardableResult
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    let passphrase = options[kSecImportExportPassphrase as String] as? String
    let parsed: PKCS12Contents
    switch PKCS12Contents.parse([UInt8](pkcs12_data as Data), passphrase: passphrase) {
    case .success(let contents): parsed = contents
    case .failure(let failure): return failure.status
    }
    let identity = SecIdentity(certificates: parsed.chain, privateKey: parsed.privateKey)
    let chain = parsed.chain.compactMap(SecCertificate.init(der:))
    var item: [String: Any] = [
        kSecImportItemIdentity as String: identity,
        kSecImportItemCertChain as String: NSArray(array: chain),
        kSecImportItemTrust as String: SecTrust(certificates: chain, policies: [SecPolicyCreateBasicX509()]),
    ]
    if let leaf = chain.first, let label = SecCertificateCopySubjectSummary(leaf) { item[kSecImportItemLabel as String] = label }
    items.pointee = NSArray(array: [NSDictionary(dictionary: item)])
    return errSecSuccess
}

/// A PKCS #12 file's key and the chain of the certificate it belongs to, through GnuTLS.
struct PKCS12Contents {
    var chain: [[UInt8]]
    var privateKey: [UInt8]

    static func parse(_ bytes: [UInt8], passphrase: String?) -> Result<PKCS12Contents, OSStatusFailure> {
        var pkcs12: gnutls_pkcs12_t?
        guard !bytes.isEmpty, gnutls_pkcs12_init(&pkcs12) == 0, let pkcs12 else { return .failure(OSStatusFailure(errSecDecode)) }
        defer { gnutls_pkcs12_deinit(pkcs12) }
        var copy = bytes
        let imported = copy.withUnsafeMutableBufferPointer { buffer in
            var datum = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return gnutls_pkcs12_import(pkcs12, &datum, GNUTLS_X509_FMT_DER, 0)
        }
        guard imported == 0 else { return .failure(OSStatusFailure(errSecDecode)) }
        if gnutls_pkcs12_verify_mac(pkcs12, passphrase ?? "") < 0 { return .failure(OSStatusFailure(errSecAuthFailed)) }
        var key: gnutls_x509_privkey_t?
        var chain: UnsafeMutablePointer<gnutls_x509_crt_t?>?
        var chainCount: UInt32 = 0
        let rc = gnutls_pkcs12_simple_parse(pkcs12, passphrase ?? "", &key, &chain, &chainCount, nil, nil, nil, 0)
        defer {
            if let key { gnutls_x509_privkey_deinit(key) }
            if let chain {
                for index in 0..<Int(chainCount) { gnutls_x509_crt_deinit(chain[index]) }
                braid_gnutls_free(chain)
            }
        }
        if rc == GNUTLS_E_DECRYPTION_FAILED { return .failure(OSStatusFailure(errSecAuthFailed)) }
        guard rc == 0, let key, let chain, chainCount > 0 else { return .failure(OSStatusFailure(errSecDecode)) }
        var keyDER = gnutls_datum_t()
        // PKCS #8, the one DER form GnuTLS reads back for every key type.
        guard gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_DER, nil, GNUTLS_PKCS_PLAIN.rawValue, &keyDER) == 0,
            let keyBytes = keyDER.data
        else {
            return .failure(OSStatusFailure(errSecDecode))
        }
        defer {
            // The key's bytes are secret: cleared before they go back.
            memset(keyBytes, 0, Int(keyDER.size))
            braid_gnutls_free(keyBytes)
        }
        let certificates = (0..<Int(chainCount)).compactMap { chain[$0].flatMap(X509Certificate.der(of:)) }
        return .success(PKCS12Contents(
            chain: certificates, privateKey: Array(UnsafeBufferPointer(start: keyBytes, count: Int(keyDER.size)))))
    }
}

/// A Security status as an `Error`, for results inside the module.
struct OSStatusFailure: Error {
    let status: OSStatus

    init(_ status: OSStatus) { self.status = status }
}
