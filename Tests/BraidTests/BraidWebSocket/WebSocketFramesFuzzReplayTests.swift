import BraidWebSocket
import Foundation
import Testing

/// The WebSocket frames fuzz corpus (Tests/BraidTests/Fixtures/fuzz-websocket-frames, run by
/// tools/fuzz.sh websocket-frames) replayed through the same checks as the fuzzer.
@Suite struct WebSocketFramesFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-websocket-frames")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= WebSocketFramesFuzzInput.seeds().count)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = WebSocketFramesFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in WebSocketFramesFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say.
    @Test func seedsBehaveAsNamed() {
        let seeds = Dictionary(uniqueKeysWithValues: WebSocketFramesFuzzInput.seeds().map { ($0.name, $0.bytes) })
        func run(_ name: String) -> WebSocketFramesFuzzInput.Outcome { WebSocketFramesFuzzInput.run(seeds[name]!) }
        let hello = Array(String(repeating: "hello, κόσμε ", count: 20).utf8)
        let message = run("server-deflate-message")
        #expect(message.error == nil && message.parserError == nil)
        #expect(message.messages == [.message(.text, hello), .message(.binary, [1, 2, 3])])
        #expect(run("server-deflate-context-takeover").messages == [.message(.text, hello), .message(.text, hello)])
        #expect(run("server-deflate-no-context-takeover").messages == [.message(.text, hello), .message(.text, hello)])
        #expect(run("server-deflate-fragments-with-ping").messages == [.message(.ping, [9]), .message(.text, hello)])
        #expect(run("server-deflate-window-8").messages == [.message(.text, hello)])
        let bomb = run("server-deflate-bomb")
        #expect(bomb.error?.closeCode == 1009 && bomb.messages.isEmpty)
        #expect(run("server-deflate-corrupt").error?.closeCode == 1007)
        #expect(run("server-deflate-rsv1-continuation").error?.closeCode == 1002)
        let ping = run("server-deflate-rsv1-ping")
        #expect(ping.error?.closeCode == 1002 && ping.parserError?.closeCode == 1002)
        let plain = run("server-plain-rsv1")
        #expect(plain.error?.closeCode == 1002 && plain.parserError?.closeCode == 1002)
        #expect(run("client-deflate-messages").messages == [.message(.text, hello), .message(.text, hello)])
    }
}
