import Braid
import Testing

/// What DTLS does not do yet says so.
@Suite struct DTLSListenerTests {
    @Test func dtlsListenersAreUnsupported() async throws {
        try await MemoryWorld.run { world in
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: world.port())) {
                DTLS { UDP() }.identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
            }
            await #expect(throws: NetworkError.unsupported("DTLS listeners (NetworkListener { DTLS { UDP() } }); DTLS clients are supported")) {
                try await listener.run { _ in }
            }
        }
    }
}
