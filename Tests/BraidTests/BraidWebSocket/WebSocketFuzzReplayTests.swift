import BraidWebSocket
import Foundation
import Testing

/// The WebSocket fuzz corpus (Tests/BraidTests/Fixtures/fuzz-websocket, run by tools/fuzz.sh
/// websocket) replayed through the same checks as the fuzzer.
@Suite struct WebSocketFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-websocket")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= WebSocketFuzzInput.seeds().count)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = WebSocketFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in WebSocketFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say.
    @Test func seedsBehaveAsNamed() {
        let seeds = Dictionary(uniqueKeysWithValues: WebSocketFuzzInput.seeds().map { ($0.name, $0.bytes) })
        func run(_ name: String) -> WebSocketFuzzInput.Outcome { WebSocketFuzzInput.run(seeds[name]!) }
        let upgrade = run("server-upgrade-and-messages")
        #expect(upgrade.opened && upgrade.error == nil)
        #expect(upgrade.messages == [.message(.text, Array("hello".utf8)), .message(.binary, [1, 2, 3])])
        #expect(run("server-fragments-with-ping").messages == [.message(.ping, [9]), .message(.text, [0x41, 0x42])])
        #expect(run("server-close").messages == [.message(.close, [0x03, 0xE8, 0x62, 0x79, 0x65])])
        #expect(run("server-unmasked").error?.closeCode == 1002)
        #expect(run("server-invalid-utf8").error?.closeCode == 1007)
        #expect(run("server-oversize").error?.closeCode == 1009)
        #expect(run("server-auto-ping").messages.isEmpty)
        let client = run("client-upgrade-and-messages")
        #expect(client.opened && client.error == nil)
        #expect(client.messages == [.message(.text, Array("κόσμε".utf8)), .message(.pong, [])])
        #expect(run("client-masked-frame").error?.closeCode == 1002)
        #expect(run("skip-handshake-frames").messages == [.message(.binary, [5, 6]), .message(.text, Array("hi".utf8))])
    }
}
