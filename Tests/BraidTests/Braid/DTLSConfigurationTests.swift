@testable import Braid
import Testing

/// DTLS options that cannot make a working handshake are refused as invalid configurations
/// before any socket, not trapped on or silently changed.
@Suite struct DTLSConfigurationTests {
    @Test(arguments: [Duration.zero, .seconds(-1), .seconds(86_401), .seconds(Int64.max)])
    func aHandshakeTimeoutOutsideOneNanosecondToADayIsRefused(_ timeout: Duration) {
        for make in [{ try DTLS { UDP() }.handshakeTimeout(timeout).clientConfiguration() as Any },
                     { try DTLS { UDP() }.handshakeTimeout(timeout).serverConfiguration() as Any }] {
            do {
                _ = try make()
                Issue.record("handshakeTimeout \(timeout) was accepted")
            } catch NetworkError.invalidConfiguration(let reason) {
                #expect(reason.contains("handshakeTimeout"))
            } catch {
                Issue.record("handshakeTimeout \(timeout) failed with \(error), not invalidConfiguration")
            }
        }
    }

    @Test func aDayIsAccepted() throws {
        _ = try DTLS { UDP() }.handshakeTimeout(.seconds(86_400)).clientConfiguration()
    }
}
