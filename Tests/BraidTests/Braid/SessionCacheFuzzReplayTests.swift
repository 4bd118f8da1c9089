import Foundation
import Testing

/// The session-cache fuzz corpus (Tests/BraidTests/Fixtures/fuzz-session-cache, run by
/// tools/fuzz.sh session-cache) replayed through the same checks as the fuzzer.
@Suite struct SessionCacheFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-session-cache")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    func harness() throws -> SessionCacheFuzzInput { try SessionCacheFuzzInput(fixtures: Fixtures.path("")) }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= 5)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = try harness().run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    /// The seeds do what their names say, as committed and as made afresh from real handshakes.
    /// The committed tickets age past their lifetime hours after they were made: the client then
    /// leaves them unused and still writes its first flight (a full handshake), as a fresh
    /// ticket writes its first with 0-RTT.
    @Test(arguments: [false, true]) func seedsBehaveAsNamed(fresh: Bool) throws {
        let harness = try harness()
        let seeds = fresh ? try harness.seeds(fixtures: Fixtures.path("")) : [:]
        func run(_ name: String) throws -> SessionCacheFuzzInput.Outcome {
            harness.run(try seeds[name] ?? [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
        }
        let file = try run("quic-and-tls-tickets")
        #expect(file.entries == 2 && file.quicTickets == 1 && file.tlsTickets == 1)
        #expect(file.tlsClientHellos == 1 && file.engineErrors == 0)
        #expect(file.quicFirstFlights == 1)
        let quic = try run("quic-ticket")
        #expect(quic.quicTickets == 1 && quic.tlsTickets == 0)
        let tls = try run("tls-ticket")
        #expect(tls.tlsTickets == 1 && tls.quicTickets == 0)
        // The flipped byte drops its entry only; the other still reaches its engine.
        let corrupted = try run("one-entry-corrupted")
        #expect(corrupted.entries == 1 && corrupted.quicTickets == 0 && corrupted.tlsClientHellos == 1)
        #expect(try run("other-format").entries == 0)
    }
}
