import Dispatch
import Foundation
import Testing

@testable import Braid

/// Cipher suites restrict what a handshake may agree: ends whose lists share a suite connect,
/// ends whose lists share none fail, in TLS 1.2 and 1.3, through both APIs.
@Suite(.timeLimit(.minutes(3))) struct TLSCipherSuiteTests {
    /// Whether a client with `client` suites reaches `ready` against a listener with `server`
    /// suites (the test certificate is ECDSA), both at `version` at most.
    private func connects(
        client: [tls_ciphersuite_t], server: [tls_ciphersuite_t], version: TLSProtocolVersion
    ) async throws -> Bool {
        let listener = try await RunningStreamListener.start(testTLSServer().cipherSuites(server).maximumVersion(version))
        defer { listener.task.cancel() }
        let connection = NetworkConnection(to: listener.endpoint) {
            testTLSClient().cipherSuites(client).maximumVersion(version)
        }
        defer { connection.cancel() }
        connection.start()
        for await state in connection.states {
            if state == .ready { return true }
            if case .failed = state { return false }
            if case .waiting(let error) = state { Issue.record("waiting: \(error)"); return false }
        }
        return false
    }

    @Test func tls12SuitesMustOverlap() async throws {
        #expect(try await connects(
            client: [.ECDHE_ECDSA_WITH_AES_256_GCM_SHA384], server: [.ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, .ECDHE_ECDSA_WITH_AES_128_GCM_SHA256],
            version: .TLSv12))
        #expect(try await !connects(
            client: [.ECDHE_ECDSA_WITH_AES_256_GCM_SHA384], server: [.ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256], version: .TLSv12))
    }

    @Test func tls13SuitesMustOverlap() async throws {
        #expect(try await connects(client: [.CHACHA20_POLY1305_SHA256], server: [.CHACHA20_POLY1305_SHA256], version: .TLSv13))
        #expect(try await !connects(client: [.AES_128_GCM_SHA256], server: [.CHACHA20_POLY1305_SHA256], version: .TLSv13))
    }

    /// A suite GnuTLS does not offer, or a list with no suite of the allowed versions, fails
    /// the connection with a message naming it.
    @Test func anUnsupportedSuiteFailsClearly() async throws {
        for (suites, words) in [([tls_ciphersuite_t.ECDHE_RSA_WITH_3DES_EDE_CBC_SHA], "0xC012"), ([.AES_128_GCM_SHA256], "none of the cipher suites")] {
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9)) {
                TLS().cipherSuites(suites).maximumVersion(.TLSv12)
            }
            defer { connection.cancel() }
            connection.start()
            var failure: NetworkError?
            for await state in connection.states {
                if case .failed(let error) = state {
                    failure = error
                    break
                }
            }
            #expect(failure.map { "\($0)".contains(words) } == true, "\(String(describing: failure))")
        }
    }

    /// The classic spellings reach the handshake: `tlsCipherSuites` and
    /// `minimumTLSProtocolVersion` on the options, and `sec_protocol_options_append_tls_ciphersuite`.
    @Test func classicSpellingsRestrictTheHandshake() async throws {
        let listener = try await RunningStreamListener.start(testTLSServer(alpn: []).cipherSuites([.CHACHA20_POLY1305_SHA256]))
        defer { listener.task.cancel() }
        func state(_ configure: (NWProtocolTLS.Options) -> Void) async throws -> NWConnection.State {
            let parameters = NWConnectionTLSTests.parameters(alpn: [])
            configure(try #require(parameters.defaultProtocolStack.applicationProtocols.first as? NWProtocolTLS.Options))
            let connection = NWConnection(host: "localhost", port: listener.port, using: parameters)
            defer { connection.cancel() }
            let states = StateRecorder(connection)
            connection.start(queue: DispatchQueue(label: "client"))
            return try await states.wait(for: "ready or failed") { if case .failed = $0 { true } else { $0 == .ready } }
        }
        let agreeing = try await state { tls in
            tls.minimumTLSProtocolVersion = .TLSv13
            tls.tlsCipherSuites = [.CHACHA20_POLY1305_SHA256]
        }
        #expect(agreeing == .ready)
        let refusing = try await state { tls in
            sec_protocol_options_append_tls_ciphersuite(tls.securityProtocolOptions, .AES_256_GCM_SHA384)
        }
        #expect(refusing != .ready)
    }
}
