import Foundation
import Testing

@testable import BraidQUIC

/// The QUIC server fuzz corpus (Tests/BraidTests/Fixtures/fuzz-quic-server, run by
/// tools/fuzz.sh quic-server) replayed through the same checks as the fuzzer.
@Suite struct QUICServerFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-quic-server")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    func harness() throws -> QUICServerFuzzInput { try QUICServerFuzzInput(fixtures: Fixtures.path("")) }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= 7)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = try harness().run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    /// The seeds do what their names say, as committed and as made afresh by Braid's client.
    @Test(arguments: [false, true]) func seedsBehaveAsNamed(fresh: Bool) throws {
        let harness = try harness()
        let seeds = fresh ? try harness.seeds(fixtures: Fixtures.path("")) : [:]
        func run(_ name: String) throws -> QUICServerFuzzInput.Outcome {
            harness.run(try seeds[name] ?? [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
        }
        let initial = try run("client-initial")
        #expect(initial.accepted == 1 && initial.statistics.connections == 1 && initial.statistics.halfOpenConnections == 1)
        #expect(initial.bytesSent > 0, "the server answers a real Initial")
        let twice = try run("initial-twice")
        #expect(twice.accepted == 1 && twice.routed == 1)
        let probe = try run("initial-then-probe")
        #expect(probe.accepted == 1 && probe.routed >= 1)
        let retry = try run("retry-then-token")
        #expect(retry.statistics.retriesSent == 1 && retry.accepted == 1 && retry.proven == 1)
        let version = try run("unknown-version")
        #expect(version.statistics.versionNegotiationsSent == 1 && version.accepted == 0)
        #expect(try run("unknown-short-header").statistics.statelessResetsSent == 1)
        let flood = try run("small-limits-flood")
        #expect(flood.accepted == 2 && flood.statistics.refusedConnections == 3)
    }
}
