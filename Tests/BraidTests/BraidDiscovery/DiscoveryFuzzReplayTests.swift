import BraidDiscovery
import Foundation
import Testing

/// The discovery fuzz corpus (Tests/BraidTests/Fixtures/fuzz-discovery, run by tools/fuzz.sh
/// discovery) replayed through the same checks as the fuzzer.
@Suite struct DiscoveryFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-discovery")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= DiscoveryFuzzInput.seeds().count)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = DiscoveryFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in DiscoveryFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    @Test func seedsBehaveAsNamed() {
        let seeds = Dictionary(uniqueKeysWithValues: DiscoveryFuzzInput.seeds().map { ($0.name, $0.bytes) })
        let browse = DiscoveryFuzzInput.run(seeds["browse-response-then-goodbye"]!)
        #expect(browse.parsed == 2 && browse.records == 5)
        #expect(DiscoveryFuzzInput.run(seeds["pointer-loop"]!).rejected == 1)
        #expect(DiscoveryFuzzInput.run(seeds["huge-counts"]!).rejected == 1)
        #expect(DiscoveryFuzzInput.run(seeds["truncated-srv"]!).rejected == 1)
        #expect(DiscoveryFuzzInput.run(seeds["conflicting-probe"]!).parsed == 1)
    }
}
