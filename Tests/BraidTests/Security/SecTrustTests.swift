import Foundation
import Testing

@testable import Braid
import BraidSecurity

/// The Security names over GnuTLS, without a connection: certificates, keys, trusts.
@Suite struct SecTrustTests {
    @Test func aCertificateRoundTripsThroughDERAndGarbageIsRefused() throws {
        let der = try Fixtures.der("server.pem")
        let certificate = try #require(SecCertificateCreateWithData(nil, der as CFData))
        #expect(SecCertificateCopyData(certificate) as Data == der)
        #expect(SecCertificateCopySubjectSummary(certificate) == "localhost")
        #expect(SecCertificateCreateWithData(nil, Data([0x30, 0x03, 0x02, 0x01]) as CFData) == nil)
        #expect(SecCertificateCreateWithData(nil, Data() as CFData) == nil)
        var truncated = der
        truncated.removeLast(10)
        #expect(SecCertificateCreateWithData(nil, truncated as CFData) == nil)
    }

    /// An EC key's external form is the uncompressed point: the SubjectPublicKeyInfo's last 65
    /// bytes, as OpenSSL writes it (tools/make-test-certs.sh keeps its output as a fixture).
    @Test func anECKeyComesOutAsItsPoint() throws {
        let certificate = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("server.pem") as CFData))
        let key = try #require(SecCertificateCopyKey(certificate))
        let bytes = try #require(SecKeyCopyExternalRepresentation(key, nil)) as Data
        #expect(bytes.count == 65 && bytes.first == 0x04)
        #expect(bytes == (try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("server-public-point.der")))))
    }

    /// An RSA key's is PKCS #1 RSAPublicKey, as `openssl rsa -RSAPublicKey_out` writes it.
    @Test func anRSAKeyComesOutAsPKCS1() throws {
        let certificate = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("rsa.pem") as CFData))
        let key = try #require(SecCertificateCopyKey(certificate))
        let pkcs1 = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("rsa-public-pkcs1.der")))
        #expect(pkcs1.first == 0x30 && pkcs1.count > 256)
        #expect(SecKeyCopyExternalRepresentation(key, nil) as Data? == pkcs1)
    }

    @Test func aChainLeadingToItsAnchorIsTrustedForItsName() throws {
        let trust = try makeTrust("server.pem", hostname: "localhost")
        #expect(SecTrustSetAnchorCertificates(trust, [try certificate("ca.pem")] as CFArray) == errSecSuccess)
        var error: CFError?
        #expect(SecTrustEvaluateWithError(trust, &error))
        #expect(error == nil)
        // The evaluated chain: the leaf, then the anchor that signs it.
        #expect(SecTrustGetCertificateCount(trust) == 2)
        #expect(SecTrustGetCertificateAtIndex(trust, 1) == (try certificate("ca.pem")))
        #expect(SecTrustCopyKey(trust) == SecCertificateCopyKey(try certificate("server.pem")))
    }

    /// A certificate the peer adds that evaluation does not walk through (here, an unrelated
    /// one) is not in the chain pinning code inspects; the anchor that signed the leaf is.
    @Test func theChainIsThePathEvaluationBuiltNotWhatThePeerSent() throws {
        var trust: SecTrust?
        SecTrustCreateWithCertificates(
            [try certificate("server.pem"), try certificate("untrusted.pem")] as CFArray, SecPolicyCreateSSL(true, "localhost" as CFString), &trust)
        let evaluated = try #require(trust)
        SecTrustSetAnchorCertificates(evaluated, [try certificate("ca.pem")] as CFArray)
        var error: CFError?
        #expect(SecTrustEvaluateWithError(evaluated, &error))
        let chain = try #require(SecTrustCopyCertificateChain(evaluated) as? [SecCertificate])
        #expect(chain == [try certificate("server.pem"), try certificate("ca.pem")])
    }

    @Test func anUnknownAuthorityAnotherAnchorAndAWrongNameAreRefused() throws {
        // The system store does not hold the test CA.
        var error: CFError?
        #expect(!SecTrustEvaluateWithError(try makeTrust("server.pem", hostname: "localhost"), &error))
        #expect(error?.code == Int(errSecNotTrusted))
        #expect(error?.localizedDescription.contains("not trusted") == true)

        let other = try makeTrust("server.pem", hostname: "localhost")
        _ = SecTrustSetAnchorCertificates(other, [try certificate("other-ca.pem")] as CFArray)
        #expect(!SecTrustEvaluateWithError(other, &error))
        #expect(error?.code == Int(errSecNotTrusted))

        let misnamed = try makeTrust("server.pem", hostname: "elsewhere.example")
        _ = SecTrustSetAnchorCertificates(misnamed, [try certificate("ca.pem")] as CFArray)
        #expect(!SecTrustEvaluateWithError(misnamed, &error))
        #expect(error?.code == Int(errSecHostNameMismatch))
    }

    @Test func theAsynchronousEvaluationAnswersOnItsQueue() async throws {
        let trust = try makeTrust("server.pem", hostname: "localhost")
        _ = SecTrustSetAnchorCertificates(trust, [try certificate("ca.pem")] as CFArray)
        let queue = DispatchQueue(label: "evaluation")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let (result, onQueue) = await withCheckedContinuation { continuation in
            SecTrustEvaluateAsyncWithError(trust, queue) { _, result, _ in
                continuation.resume(returning: (result, DispatchQueue.getSpecific(key: key) == true))
            }
        }
        #expect(result && onQueue)
    }

    private func certificate(_ name: String) throws -> SecCertificate {
        try #require(SecCertificateCreateWithData(nil, try Fixtures.der(name) as CFData))
    }

    private func makeTrust(_ leaf: String, hostname: String) throws -> SecTrust {
        var trust: SecTrust?
        let status = SecTrustCreateWithCertificates(try certificate(leaf), SecPolicyCreateSSL(true, hostname as CFString), &trust)
        #expect(status == errSecSuccess)
        return try #require(trust)
    }
}

extension Fixtures {
    /// The first certificate of a PEM fixture, DER.
    static func der(_ name: String) throws -> Data {
        try der(atPath: path(name))
    }

    static func der(atPath path: String) throws -> Data {
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        let body = pem.components(separatedBy: "-----BEGIN CERTIFICATE-----")[1]
            .components(separatedBy: "-----END CERTIFICATE-----")[0]
            .filter { !$0.isWhitespace }
        return try #require(Data(base64Encoded: body))
    }
}
