import BraidHTTP3
import Foundation
import HTTPTypes
import Testing

/// The HTTP/3 server fuzz corpus (Tests/BraidTests/Fixtures/fuzz-http3-server, run by
/// tools/fuzz.sh http3-server) replayed through the same checks as the fuzzer.
@Suite struct HTTP3ServerFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-http3-server")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= 6)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        HTTP3ServerFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    /// The committed seeds are the ones `seeds()` writes (`tools/fuzz.sh http3-server --seeds`).
    @Test func theCommittedSeedsAreTheWrittenOnes() throws {
        for (name, bytes) in HTTP3ServerFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say, as committed and as written now.
    @Test(arguments: [false, true]) func seedsBehaveAsNamed(fresh: Bool) throws {
        let seeds = Dictionary(uniqueKeysWithValues: HTTP3ServerFuzzInput.seeds())
        func run(_ name: String) throws -> HTTP3ServerFuzzInput.Outcome {
            let bytes = fresh ? try #require(seeds[name]) : try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name)))
            return HTTP3ServerFuzzInput.run(bytes)
        }
        let get = try run("get-request")
        #expect(get.requests.map(\.path) == ["/index.html"] && get.writes > 0 && get.closeCode == nil, "\(get)")
        let rapid = try run("rapid-reset")
        #expect(rapid.headers == 4 && rapid.streamResets == 4 && rapid.closeCode == nil, "\(rapid)")
        let oversized = try run("oversized-field-section")
        #expect(oversized.excessiveLoadResets == 1 && oversized.headers == 1 && oversized.closeCode == nil, "\(oversized)")
        #expect(try run("qpack-garbage").closeCode == BraidHTTP3.HTTP3ErrorCode.qpackDecompressionFailed)
        let uppercase = try run("uppercase-field")
        #expect(uppercase.headers == 0 && uppercase.closeCode == nil, "\(uppercase)")
        let post = try run("post-with-body")
        #expect(post.requests.map(\.method) == [.post] && post.closeCode == nil, "\(post)")
    }
}
