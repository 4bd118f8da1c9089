import Foundation
import Testing

@testable import Braid

/// The custom-framer fuzz corpus (Tests/BraidTests/Fixtures/fuzz-custom-framer, run by
/// tools/fuzz.sh custom-framer) replayed through the same checks as the fuzzer.
@Suite struct CustomFramerFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-custom-framer")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= CustomFramerFuzzInput.seeds().count)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = CustomFramerFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in CustomFramerFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say.
    @Test func seedsBehaveAsNamed() {
        let seeds = Dictionary(uniqueKeysWithValues: CustomFramerFuzzInput.seeds().map { ($0.name, $0.bytes) })
        func run(_ name: String) -> CustomFramerFuzzInput.Outcome { CustomFramerFuzzInput.run(seeds[name]!) }
        let length = run("length-messages")
        #expect(length.error == nil)
        #expect(length.messages.map(\.kind) == [1, 2, 3])
        #expect(length.messages.map(\.content.count) == [5, 0, 3000])
        #expect(length.messages.first?.content == Array("hello".utf8))
        let tooLarge = run("length-too-large")
        #expect(tooLarge.messages.map(\.content) == [[1, 2]])
        #expect(tooLarge.error == .messageTooLarge(size: 65, maximum: 64))
        let truncated = run("length-truncated")
        #expect(truncated.messages.isEmpty && truncated.error == nil)
        #expect(run("lines").messages.map(\.content) == [Array("one".utf8), Array("two".utf8), []])
        let endless = run("lines-without-newline")
        #expect(endless.messages.isEmpty)
        #expect(endless.error.map { if case .messageTooLarge = $0 { true } else { false } } == true)
        #expect(run("parts").messages.map(\.content) == [[1, 2, 3, 4, 5], [6]])
        #expect(run("parts-too-large").error == .messageTooLarge(size: 127, maximum: 64))
        let handshake = run("handshake-then-pass-through")
        #expect(handshake.error == nil)
        #expect(handshake.messages.flatMap(\.content) == Array("raw bytes".utf8))
        #expect(run("handshake-refused").error == .system(call: "framer", errno: POSIXErrorCode.EPROTO.rawValue))
    }
}
