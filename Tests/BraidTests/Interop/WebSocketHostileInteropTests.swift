import Braid
import Foundation
import Testing

/// A raw-socket client (`websockets_peer.py hostile` and `bad-upgrade`) against a Braid
/// listener, for what `WebSocketInteropTests` does not send: invalid UTF-8 split across
/// fragments with a ping between them, a continuation with nothing to continue, a message
/// begun inside another, permessage-deflate's violations (a deflate bomb, corrupt data, RSV1
/// where it may not be) once the listener agreed to compress, and malformed upgrade requests,
/// each answered as RFC 6455 says; the listener goes on serving after each.
@Suite(.serialized, .timeLimit(.minutes(3))) struct WebSocketHostileInteropTests {
    static let frameCases: [(String, Int)] = [
        ("utf8-split-across-fragments", 1007), ("continuation-first", 1002), ("message-inside-message", 1002),
        ("deflate-bomb", 1009), ("deflate-corrupt", 1007), ("deflate-rsv1-continuation", 1002), ("deflate-rsv1-ping", 1002),
    ]

    @Test(arguments: WebSocketInteropTests.Scheme.allCases)
    func hostileFramesGetTheRightCloseCode(_ scheme: WebSocketInteropTests.Scheme) async throws {
        let stack = WebSocketInteropTests.braidServer(scheme, maximumMessageSize: 1000).perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate())
        let server = try await RunningFramedListener.start(stack) { connection in
            for try await _ in connection.messages {}
        }
        defer { server.task.cancel() }
        for (name, code) in Self.frameCases {
            var arguments = ["hostile", "--port", String(server.listener.port!.rawValue), "--case", name]
            if scheme == .wss { arguments += ["--ca", Fixtures.caFile] }
            let report = try await runClient(try WebSocketInteropTests.peer(arguments))
            #expect(report["close_code"] as? Int == code, "\(name): \(report)")
        }
    }

    static let upgradeCases: [(String, Int)] = [
        ("version-12", 426), ("no-key", 400), ("short-key", 400), ("post", 400), ("no-upgrade", 400), ("no-host", 400),
        ("header-without-colon", 400),
    ]

    @Test func badUpgradesGetTheRightStatus() async throws {
        let server = try await RunningFramedListener.start(WebSocketInteropTests.braidServer(.ws)) { connection in
            for try await _ in connection.messages {}
        }
        defer { server.task.cancel() }
        for (name, status) in Self.upgradeCases {
            let report = try await runClient(
                try WebSocketInteropTests.peer(["bad-upgrade", "--port", String(server.listener.port!.rawValue), "--case", name]))
            #expect(report["status"] as? Int == status, "\(name): \(report)")
        }
        // And a good client still gets through.
        let client = NetworkConnection(to: .url(URL(string: "ws://127.0.0.1:\(server.listener.port!.rawValue)/")!)) {
            WebSocket { TCP() }.subprotocols(["chat"])
        }
        defer { client.cancel() }
        try await client.send("still serving")
        try await client.close(code: .protocolCode(.normalClosure), reason: nil)
        #expect(try await client.receive().metadata.opcode == .close)
        #expect(client.selectedSubprotocol == "chat")
    }
}
