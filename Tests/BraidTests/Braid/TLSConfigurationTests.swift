import Foundation
import Testing

@testable import Braid
import BraidCore
import BraidTLS

/// TLS options that cannot make a working handshake are refused as invalid configurations
/// before any socket, as DTLS's are, not trapped on; and what a rejected certificate's error
/// advises fits every stack.
@Suite struct TLSConfigurationTests {
    @Test(arguments: [Duration.zero, .seconds(-1), .seconds(86_401), .seconds(Int64.max)])
    func aHandshakeTimeoutOutsideOneNanosecondToADayIsRefused(_ timeout: Duration) {
        let tls = TLS().handshakeTimeout(timeout).identity(
            certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        for make in [{ try tls.clientConfiguration() as Any }, { try tls.serverConfiguration() as Any }] {
            do {
                _ = try make()
                Issue.record("handshakeTimeout \(timeout) was accepted")
            } catch NetworkError.invalidConfiguration(let reason) {
                #expect(reason.contains("TLS handshakeTimeout"), "\(reason)")
            } catch {
                Issue.record("handshakeTimeout \(timeout) failed with \(error), not invalidConfiguration")
            }
        }
    }

    /// A connection with an absurd timeout fails its start with the configuration error.
    @Test func aConnectionWithAnAbsurdTimeoutFailsClearly() async throws {
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9)) {
            TLS().handshakeTimeout(.seconds(Int64.max))
        }
        defer { connection.cancel() }
        await #expect(throws: NetworkError.self) { try await connection.send(Data("never".utf8)) }
        guard case .failed(.invalidConfiguration(let reason)) = connection.state else {
            Issue.record("the connection is \(connection.state), not failed with invalidConfiguration")
            return
        }
        #expect(reason.contains("handshakeTimeout"))
    }

    @Test func aDayIsAccepted() throws {
        _ = try TLS().handshakeTimeout(.seconds(86_400)).clientConfiguration()
    }

    /// Deadline arithmetic saturates instead of trapping on durations past UInt64's nanoseconds.
    @Test func nanosecondsSaturate() {
        #expect(Duration.seconds(Int64.max).nanosecondsClamped == .max)
        #expect(Duration.seconds(18_446_744_073).nanosecondsClamped == 18_446_744_073_000_000_000)
        #expect(Duration.seconds(-5).nanosecondsClamped == 0)
        #expect(Duration.milliseconds(1500).nanosecondsClamped == 1_500_000_000)
        #expect((MonotonicInstant(nanoseconds: 10) + .seconds(Int64.max)).nanoseconds == 9)
    }

    /// The application's own refusal says so, without advice about authorities; the other
    /// problems' advice names `trust(_:)` without tying it to QUIC.
    @Test func aRejectedCertificatesAdviceFitsTheStack() {
        let refused = NetworkError.certificateRejected(.rejected).description
        #expect(refused.contains("verify block"), "\(refused)")
        #expect(!refused.contains("QUIC"), "\(refused)")
        let untrusted = NetworkError.certificateRejected(.untrusted).description
        #expect(untrusted.contains("trust(.certificateAuthorities(file:)) on the QUIC, TLS or DTLS stack"), "\(untrusted)")
        #expect(!untrusted.contains("QUIC.trust"), "\(untrusted)")
    }
}
