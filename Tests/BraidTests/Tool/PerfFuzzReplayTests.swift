import Braid
import Foundation
import Testing

/// The perf fuzz corpus (Tests/BraidTests/Fixtures/fuzz-perf, run by tools/fuzz.sh perf)
/// replayed through the same checks as the fuzzer.
@Suite struct PerfFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-perf")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= 7)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = PerfFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in PerfFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say.
    @Test func seedsBehaveAsNamed() throws {
        func run(_ name: String) throws -> PerfFuzzInput.Outcome {
            PerfFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
        }
        let plain = try run("request-4096")
        #expect(plain.requested == 4096 && plain.isComplete && plain.uploaded == 0)
        let upload = try run("request-with-upload")
        #expect(upload.requested == 10 && upload.uploaded == 1000 && upload.uploadIntact && upload.isComplete)
        let corrupted = try run("request-corrupted-upload")
        #expect(corrupted.uploaded == 1000 && !corrupted.uploadIntact)
        let unfinished = try run("request-unfinished")
        #expect(unfinished.requested == 1 << 30 && unfinished.uploaded == 10 && !unfinished.isComplete)
        guard case .unexpectedEndOfStream(received: 5, wanted: 8)? = try run("truncated-header").error else {
            Issue.record("a 5-byte request did not fail as cut short")
            return
        }
        #expect(try run("request-above-int-max").requested == .max)
        #expect(try run("echo-datagram-7").echoNumber == 7)
    }
}
