import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// Identities from PKCS #12 files (`SecPKCS12Import`) in classic TLS options: a TLS
/// `NWListener` presents one, and a client presents one to a listener that asks.
@Suite(.timeLimit(.minutes(3))) struct LocalIdentityTests {
    /// `name`.pem and its key as a PKCS #12 file sealed with "secret" (a fixture
    /// tools/make-test-certs.sh makes with OpenSSL).
    static func pkcs12(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("\(name).p12")))
    }

    static func identity(_ name: String) throws -> SecIdentity {
        var items: CFArray?
        let status = SecPKCS12Import(
            try pkcs12(name) as CFData, [kSecImportExportPassphrase as String: "secret"] as CFDictionary, &items)
        try #require(status == errSecSuccess)
        let first = try #require((items as? [[String: Any]])?.first)
        return try #require(first[kSecImportItemIdentity as String] as? SecIdentity)
    }

    @Test func importGivesTheIdentityAndRefusesAWrongPassphraseOrGarbage() throws {
        let p12 = try Self.pkcs12("server")
        var items: CFArray?
        #expect(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "secret"] as CFDictionary, &items) == errSecSuccess)
        let item = try #require((items as? [[String: Any]])?.first)
        let identity = try #require(item[kSecImportItemIdentity as String] as? SecIdentity)
        var certificate: SecCertificate?
        #expect(SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess)
        #expect(certificate.map { SecCertificateCopyData($0) as Data } == (try Fixtures.der("server.pem")))
        #expect(item[kSecImportItemLabel as String] as? String == "localhost")

        var none: CFArray?
        #expect(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "wrong"] as CFDictionary, &none) == errSecAuthFailed)
        #expect(SecPKCS12Import(Data("not pkcs12".utf8) as CFData, [:] as CFDictionary, &none) == errSecDecode)
        #expect(none == nil)
    }

    /// A classic TLS listener whose options carry an imported identity serves a classic TLS
    /// client, which verifies the certificate against the test CA and the name.
    @Test func aTLSListenerPresentsItsLocalIdentity() async throws {
        let serverOptions = NWProtocolTLS.Options()
        sec_protocol_options_set_local_identity(serverOptions.securityProtocolOptions, try #require(sec_identity_create(try Self.identity("server"))))
        let server = try ClassicEchoServer(NWParameters(tls: serverOptions))
        let port = try await server.start()
        defer { server.listener.cancel() }

        let connection = NWConnection(host: "localhost", port: port, using: NWConnectionTLSTests.parameters(alpn: []))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("identity".utf8)) == nil)
        let echoed = await connection.receiveAsync()
        #expect(echoed.content == Data("identity".utf8))
    }

    /// Without an identity a classic TLS listener fails with EINVAL (the log names what to add).
    @Test func aTLSListenerWithoutAnIdentityFailsClearly() async throws {
        let listener = try NWListener(using: .tls)
        let (states, continuation) = AsyncStream<NWListener.State>.makeStream()
        listener.stateUpdateHandler = { continuation.yield($0) }
        listener.start(queue: DispatchQueue(label: "listener"))
        defer { listener.cancel() }
        let failure = try await withDeadline(.seconds(60)) {
            for await state in states { if case .failed(let error) = state { return error } }
            return nil
        }
        #expect(failure == .posix(.EINVAL))
    }

    /// A classic client presents its imported identity to a listener that requires client
    /// certificates from the test CA.
    @Test func aClientPresentsItsIdentityForMutualTLS() async throws {
        let server = try await RunningStreamListener.start(
            testTLSServer().peerAuthentication(.required).trust(.certificateAuthorities(file: Fixtures.caFile)))
        defer { server.task.cancel() }
        let parameters = NWConnectionTLSTests.parameters(alpn: ["echo"])
        let tls = try #require(parameters.defaultProtocolStack.applicationProtocols.first as? NWProtocolTLS.Options)
        sec_protocol_options_set_local_identity(tls.securityProtocolOptions, try #require(sec_identity_create(try Self.identity("client"))))
        let connection = NWConnection(host: "localhost", port: server.port, using: parameters)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("mutual".utf8)) == nil)
        let echoed = await connection.receiveAsync()
        #expect(echoed.content == Data("mutual".utf8))
    }
}
