import Testing

import BraidWebSocket

/// A server engine answers an upgrade head it cannot take with an HTTP error before failing:
/// 400 for a head that does not parse, 431 for one past the limit.
@Suite struct WebSocketUpgradeRefusalTests {
    typealias T = WebSocketTesting

    func status(_ bytes: [UInt8]) -> String {
        String(String(decoding: bytes, as: UTF8.self).split(separator: "\r\n").first ?? "")
    }

    @Test func malformedHeaderLineIsAnsweredWith400() {
        let server = T.server()
        server.start()
        let request = "GET / HTTP/1.1\r\nHost: h\r\nUpgrade websocket\r\n\r\n"
        #expect(throws: WebSocketError.self) { try Array(request.utf8).withUnsafeBytes { try server.receive($0) } }
        #expect(status(T.sentBytes(server)) == "HTTP/1.1 400 Bad Request")
        #expect(!server.isOpen)
    }

    @Test func headPastTheLimitIsAnsweredWith431() {
        let server = T.server { $0.maximumHeadSize = 1024 }
        server.start()
        let filler = Array("GET / HTTP/1.1\r\n".utf8) + Array(repeating: Array("X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8), count: 40).flatMap { $0 }
        #expect(throws: WebSocketError.handshakeTooLarge(limit: 1024)) { try filler.withUnsafeBytes { try server.receive($0) } }
        #expect(status(T.sentBytes(server)) == "HTTP/1.1 431 Request Header Fields Too Large")
    }

    @Test func clientAnswersNothingToAMalformedResponse() {
        let client = T.client()
        client.start()
        _ = T.sentBytes(client)
        #expect(throws: WebSocketError.self) { try Array("HTTP/1.1 101 OK\r\nbroken line\r\n\r\n".utf8).withUnsafeBytes { try client.receive($0) } }
        #expect(T.sentBytes(client).isEmpty)
    }
}
