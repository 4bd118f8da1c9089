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

    /// An EC key's external form is the uncompressed point, the SubjectPublicKeyInfo's last 65
    /// bytes as OpenSSL writes it.
    @Test func anECKeyComesOutAsItsPoint() throws {
        let certificate = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("server.pem") as CFData))
        let key = try #require(SecCertificateCopyKey(certificate))
        let bytes = try #require(SecKeyCopyExternalRepresentation(key, nil)) as Data
        let spki = try openssl(["x509", "-in", Fixtures.path("server.pem"), "-pubkey", "-noout"])
            .flatMap { try openssl(["pkey", "-pubin", "-outform", "DER"], input: $0) }
        #expect(bytes.count == 65 && bytes.first == 0x04)
        #expect(spki.map { Data($0.suffix(65)) } == bytes)
    }

    /// An RSA key's is PKCS #1 RSAPublicKey, as `openssl rsa -RSAPublicKey_out` writes it.
    @Test func anRSAKeyComesOutAsPKCS1() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-rsa-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificatePath = directory.appendingPathComponent("rsa.pem").path
        _ = try openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=rsa.test", "-days", "1",
            "-keyout", directory.appendingPathComponent("rsa-key.pem").path, "-out", certificatePath,
        ])
        let pkcs1 = try openssl(["x509", "-in", certificatePath, "-pubkey", "-noout"])
            .flatMap { try openssl(["rsa", "-pubin", "-RSAPublicKey_out", "-outform", "DER"], input: $0) }
        let certificate = try #require(SecCertificateCreateWithData(nil, try Fixtures.der(atPath: certificatePath) as CFData))
        let key = try #require(SecCertificateCopyKey(certificate))
        #expect(SecKeyCopyExternalRepresentation(key, nil) as Data? == pkcs1)
    }

    @Test func aChainLeadingToItsAnchorIsTrustedForItsName() throws {
        let trust = try makeTrust("server.pem", hostname: "localhost")
        #expect(SecTrustSetAnchorCertificates(trust, [try certificate("ca.pem")] as CFArray) == errSecSuccess)
        var error: CFError?
        #expect(SecTrustEvaluateWithError(trust, &error))
        #expect(error == nil)
        #expect(SecTrustGetCertificateCount(trust) == 1)
        #expect(SecTrustCopyKey(trust) == SecCertificateCopyKey(try certificate("server.pem")))
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

/// Runs `openssl` with `arguments` and `input` on its standard input; its output.
func openssl(_ arguments: [String], input: Data? = nil) throws -> Data? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    let output = Pipe(), stdin = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? data : nil
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
