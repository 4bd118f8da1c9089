import BraidFramers
import Foundation
import Testing

/// The fuzz corpus (Tests/BraidTests/Fixtures/fuzz-framers, run by tools/fuzz.sh framers)
/// replayed through the same checks as the fuzzer: no crash, only whole messages or typed errors.
@Suite struct FuzzCorpusReplayTests {
    static let directory = Fixtures.path("fuzz-framers")

    static var inputs: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= 8)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name)))
        _ = FramersFuzzInput.run(bytes)
    }

    /// The seeds that say what they hold do what they say.
    @Test func seedsDecodeAsNamed() throws {
        func run(_ name: String) throws -> FramersFuzzInput.Outcome {
            FramersFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
        }
        #expect(try run("three-messages").messages == 3)
        #expect(try run("json-sample").decoded == 1)
        #expect(try run("json-datagram").datagramDecoded == 1)
        #expect(try run("hostile-4gib").framingError == .messageTooLarge(type: 9, size: UInt64(UInt32.max), maximum: 16 << 20))
        let small = try run("above-small-maximum")
        #expect(small.messages == 1)
        #expect(small.framingError != nil)
    }
}
