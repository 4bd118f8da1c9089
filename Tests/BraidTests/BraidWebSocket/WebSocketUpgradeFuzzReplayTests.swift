import BraidWebSocket
import Foundation
import Testing

/// The WebSocket upgrade fuzz corpus (Tests/BraidTests/Fixtures/fuzz-websocket-upgrade, run by
/// tools/fuzz.sh websocket-upgrade) replayed through the same checks as the fuzzer.
@Suite struct WebSocketUpgradeFuzzReplayTests {
    static let directory = Fixtures.path("fuzz-websocket-upgrade")
    static var inputs: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    @Test func theCorpusIsThere() {
        #expect(Self.inputs.count >= WebSocketUpgradeFuzzInput.seeds().count)
    }

    @Test(arguments: inputs) func replay(_ name: String) throws {
        _ = WebSocketUpgradeFuzzInput.run(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))))
    }

    @Test func theCommittedSeedsAreTheGeneratedOnes() throws {
        for (name, bytes) in WebSocketUpgradeFuzzInput.seeds() {
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.directory + "/" + name))) == bytes, "\(name)")
        }
    }

    /// The seeds do what their names say.
    @Test func seedsBehaveAsNamed() {
        let seeds = Dictionary(uniqueKeysWithValues: WebSocketUpgradeFuzzInput.seeds().map { ($0.name, $0.bytes) })
        func run(_ name: String) -> WebSocketUpgradeFuzzInput.Outcome { WebSocketUpgradeFuzzInput.run(seeds[name]!) }
        typealias Agreement = WebSocketDeflateNegotiation.Agreement
        func agreement(_ change: (inout Agreement) -> Void) -> Agreement {
            var agreement = Agreement()
            change(&agreement)
            return agreement
        }
        let plain = run("server-offer-default")
        #expect(plain.opened && plain.agreement == Agreement())
        #expect(String(decoding: plain.response, as: UTF8.self).contains("Sec-WebSocket-Extensions: permessage-deflate\r\n"))
        #expect(
            run("server-offer-all").agreement
                == agreement {
                    $0.serverNoContextTakeover = true
                    $0.clientNoContextTakeover = true
                    $0.serverMaxWindowBits = 10
                    $0.clientMaxWindowBits = 9
                })
        #expect(run("server-offer-fallback").agreement == agreement { $0.clientMaxWindowBits = 10 })
        let declined = run("server-offer-bad-window")
        #expect(declined.opened && declined.agreement == nil)
        #expect(run("server-offer-unbounded-client").agreement == nil)
        #expect(run("server-offer-deflate-off").agreement == nil)
        #expect(run("client-answer-default").agreement == Agreement())
        #expect(
            run("client-answer-windows").agreement
                == agreement {
                    $0.serverMaxWindowBits = 10
                    $0.clientMaxWindowBits = 9
                })
        for name in ["client-answer-unknown", "client-answer-no-value", "client-answer-unoffered"] {
            let refused = run(name)
            #expect(!refused.opened, "\(name)")
            if case .handshakeFailed = refused.error {} else { Issue.record("\(name): \(String(describing: refused.error))") }
        }
        #expect(run("client-answer-quoted").agreement == agreement { $0.serverMaxWindowBits = 12 })
    }
}
