import Testing

import BraidWebSocket

/// The WebSocket engine in memory: the upgrade both ways, messages through masks, fragments
/// with control frames between them, and every rule a hostile peer can break, each with the
/// close code the peer is owed.
@Suite struct WebSocketEngineTests {
    typealias T = WebSocketTesting

    /// Feeds `bytes` to `engine`; returns the error it threw (nil: none).
    func feed(_ engine: WebSocketConnection, _ bytes: [UInt8]) -> WebSocketError? {
        do {
            try bytes.withUnsafeBytes { try engine.receive($0) }
            return nil
        } catch {
            return error as? WebSocketError
        }
    }

    /// Expects `bytes` to fail `engine` with a close of `code` queued for the peer.
    func expectClose(_ engine: WebSocketConnection, _ bytes: [UInt8], code: UInt16, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = feed(engine, bytes)
        #expect(error?.closeCode == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        let sent = T.sentFrames(engine)
        #expect(sent.last?.opcode == 0x8, sourceLocation: sourceLocation)
        #expect(sent.last.flatMap { T.closeCode($0.payload) } == code, sourceLocation: sourceLocation)
        // A failed engine takes nothing more.
        #expect(feed(engine, T.frame(0x1, Array("late".utf8))) != nil, sourceLocation: sourceLocation)
    }

    @Test func acceptKeyMatchesTheRFCExample() {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func upgradeChoosesTheClientsFirstSupportedSubprotocol() throws {
        let (client, server) = try T.openPair(
            client: { $0.subprotocols = ["v3", "v2", "v1"] }, server: { $0.subprotocols = ["v1", "v2"] })
        #expect(client.subprotocol == "v2")
        #expect(server.subprotocol == "v2")
        #expect(T.events(client) == [.opened(subprotocol: "v2")])
        #expect(T.events(server) == [.opened(subprotocol: "v2")])
    }

    @Test func upgradeArrivingOneByteAtATimeCompletes() throws {
        let client = T.client(), server = T.server()
        client.start()
        var request: [UInt8] = []
        _ = client.withPendingOutput { request.append(contentsOf: $0); return $0.count }
        for byte in request { #expect(feed(server, [byte]) == nil) }
        #expect(server.isOpen)
        try T.move(server, to: client)
        #expect(client.isOpen)
    }

    @Test func messagesOfManySizesCrossBothWays() throws {
        let (client, server) = try T.openPair()
        _ = (T.events(client), T.events(server))
        for size in [0, 1, 125, 126, 127, 65535, 65536, 70000] {
            let payload = (0 ..< size).map { UInt8(truncatingIfNeeded: $0 * 31) }
            try payload.withUnsafeBytes { try client.send(.binary, $0) }
            try T.move(client, to: server)
            #expect(T.events(server) == [.message(.binary, payload)])
            try payload.withUnsafeBytes { try server.send(.binary, $0) }
            try T.move(server, to: client)
            #expect(T.events(client) == [.message(.binary, payload)])
        }
    }

    @Test func streamedFramesAreMaskedAcrossPieces() throws {
        let (client, server) = try T.openPair()
        _ = T.events(server)
        let payload = (0 ..< 1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try client.beginFrame(.text, length: payload.count)
        let text = Array(String(repeating: "é", count: 500).utf8)
        #expect(text.count == 1000)
        for start in stride(from: 0, to: 1000, by: 333) { text[start ..< min(start + 333, 1000)].withUnsafeBytes { client.appendPayload($0) } }
        try T.move(client, to: server)
        #expect(T.events(server) == [.message(.text, text)])
        _ = payload
    }

    @Test func fragmentsReassembleWithControlFramesBetween() throws {
        let server = try T.openPair().server
        _ = T.events(server)
        let pieces = [Array("Hel".utf8), Array("lo, ".utf8), Array("wörld".utf8)]
        var bytes = T.frame(0x1, pieces[0], fin: false)
        bytes += T.frame(0x9, Array("ping".utf8))
        bytes += T.frame(0x0, pieces[1], fin: false)
        bytes += T.frame(0xA, [])
        bytes += T.frame(0x0, pieces[2], fin: true)
        #expect(feed(server, bytes) == nil)
        #expect(T.events(server) == [.message(.ping, Array("ping".utf8)), .message(.pong, []), .message(.text, Array("Hello, wörld".utf8))])
    }

    @Test func autoReplyPingAnswersAndDeliversNothing() throws {
        let server = try T.openPair(server: { $0.autoReplyPing = true }).server
        _ = T.events(server)
        #expect(feed(server, T.frame(0x9, [1, 2, 3])) == nil)
        #expect(T.events(server).isEmpty)
        let sent = T.sentFrames(server)
        #expect(sent.count == 1 && sent[0].opcode == 0xA && sent[0].payload == [1, 2, 3])
    }

    @Test func serverRejectsAnUnmaskedFrame() throws {
        expectClose(try T.openPair().server, T.frame(0x2, [1, 2], mask: nil), code: 1002)
    }

    @Test func clientRejectsAMaskedFrame() throws {
        expectClose(try T.openPair().client, T.frame(0x2, [1, 2]), code: 1002)
    }

    @Test(arguments: [UInt8(1), 2, 4, 7])
    func reservedBitsAreRefused(_ bits: UInt8) throws {
        expectClose(try T.openPair().server, T.frame(0x2, [1], reserved: bits), code: 1002)
    }

    @Test(arguments: [UInt8(0x3), 0x7, 0xB, 0xF])
    func reservedOpcodesAreRefused(_ opcode: UInt8) throws {
        expectClose(try T.openPair().server, T.frame(opcode, []), code: 1002)
    }

    @Test func fragmentedControlFrameIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x9, [1], fin: false), code: 1002)
    }

    @Test func controlFrameOver125BytesIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x9, [UInt8](repeating: 0, count: 126)), code: 1002)
    }

    @Test func continuationWithoutAMessageIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x0, [1]), code: 1002)
    }

    @Test func newMessageInsideAFragmentedOneIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x1, [0x41], fin: false) + T.frame(0x2, [1]), code: 1002)
    }

    @Test func invalidUTF8TextIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x1, [0x41, 0xC0, 0xAF]), code: 1007)
    }

    @Test func invalidUTF8FailsAtTheFragmentThatBreaksIt() throws {
        let server = try T.openPair().server
        // A valid first fragment, then a surrogate (ED A0 80), before the message ends.
        #expect(feed(server, T.frame(0x1, [0x41], fin: false)) == nil)
        expectClose(server, T.frame(0x0, [0xED, 0xA0, 0x80], fin: false), code: 1007)
    }

    @Test func textCutInsideACodePointIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x1, [0xE2, 0x82]), code: 1007)
    }

    @Test func codePointSplitAcrossFragmentsIsAccepted() throws {
        let server = try T.openPair().server
        _ = T.events(server)
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        #expect(feed(server, T.frame(0x1, [euro[0]], fin: false) + T.frame(0x0, Array(euro[1...]))) == nil)
        #expect(T.events(server) == [.message(.text, euro)])
    }

    @Test func utf8ValidatorRejectsOverlongsSurrogatesAndBeyondUnicode() {
        for bad: [UInt8] in [[0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF], [0x80]] {
            #expect(!bad.withUnsafeBytes { UTF8Validator.isValid($0) }, "\(bad)")
        }
        for good in ["", "a", "é", "€", "𝄞", "κόσμε"] {
            #expect(Array(good.utf8).withUnsafeBytes { UTF8Validator.isValid($0) }, "\(good)")
        }
    }

    @Test func messageOverTheMaximumIsRefusedAtItsHeader() throws {
        let server = try T.openPair(server: { $0.maximumMessageSize = 1000 }).server
        // Only the header of a 1001-byte frame: refused before any payload arrives.
        let header = Array(T.frame(0x2, [UInt8](repeating: 0, count: 1001)).prefix(8))
        expectClose(server, header, code: 1009)
    }

    @Test func fragmentsPassingTheMaximumTogetherAreRefused() throws {
        let server = try T.openPair(server: { $0.maximumMessageSize = 1000 }).server
        #expect(feed(server, T.frame(0x2, [UInt8](repeating: 0, count: 600), fin: false)) == nil)
        expectClose(server, T.frame(0x0, [UInt8](repeating: 0, count: 600)), code: 1009)
    }

    @Test func hugeAnnouncedLengthIsRefusedWithoutBuffering() throws {
        let server = try T.openPair().server
        expectClose(server, T.frame(0x2, [], lengthOverride: 1 << 40), code: 1009)
    }

    @Test func lengthWithTheTopBitSetIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x2, [], lengthOverride: 1 << 63), code: 1002)
    }

    @Test func peerCloseIsAnsweredWithItsCodeAndDelivered() throws {
        let server = try T.openPair().server
        _ = T.events(server)
        let payload: [UInt8] = [0x03, 0xE8] + Array("bye".utf8)
        #expect(feed(server, T.frame(0x8, payload)) == nil)
        #expect(T.events(server) == [.message(.close, payload)])
        let sent = T.sentFrames(server)
        #expect(sent.count == 1 && sent[0].opcode == 0x8 && T.closeCode(sent[0].payload) == 1000)
        // Nothing after the close is delivered.
        #expect(feed(server, T.frame(0x1, Array("more".utf8))) == nil)
        #expect(T.events(server).isEmpty)
    }

    @Test func emptyCloseIsAnsweredEmpty() throws {
        let server = try T.openPair().server
        _ = T.events(server)
        #expect(feed(server, T.frame(0x8, [])) == nil)
        #expect(T.sentFrames(server).map(\.payload) == [[]])
    }

    @Test(arguments: [UInt16(0), 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
    func closeWithACodeThatMayNotBeSentIsRefused(_ code: UInt16) throws {
        expectClose(try T.openPair().server, T.frame(0x8, [UInt8(code >> 8), UInt8(code & 0xFF)]), code: 1002)
    }

    @Test func closeOfOneByteIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x8, [0x03]), code: 1002)
    }

    @Test func closeWithInvalidUTF8ReasonIsRefused() throws {
        expectClose(try T.openPair().server, T.frame(0x8, [0x03, 0xE8, 0xFF]), code: 1007)
    }

    @Test func ourCloseIsSentOnceAndDataAfterItIsDropped() throws {
        let (client, server) = try T.openPair()
        _ = (T.events(client), T.events(server))
        client.close(code: 1001, reason: Array("away".utf8))
        client.close(code: 1000, reason: [])
        try [UInt8]([1]).withUnsafeBytes { try client.send(.binary, $0) }
        try T.move(client, to: server)
        #expect(T.events(server) == [.message(.close, [0x03, 0xE9] + Array("away".utf8))])
        try T.move(server, to: client)
        #expect(T.events(client) == [.message(.close, [0x03, 0xE9])])
    }

    @Test func controlFramesToSendAreLimitedTo125Bytes() throws {
        let client = try T.openPair().client
        #expect(throws: WebSocketError.controlFrameTooLarge(126)) {
            try [UInt8](repeating: 0, count: 126).withUnsafeBytes { try client.send(.ping, $0) }
        }
    }

    @Test func endlessUpgradeHeadFailsAtTheLimit() {
        let server = T.server { $0.maximumHeadSize = 4096 }
        var error: WebSocketError?
        var fed = 0
        while error == nil && fed < 100_000 {
            error = feed(server, Array("X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8))
            fed += 64
        }
        #expect(error == .handshakeTooLarge(limit: 4096))
        #expect(fed <= 4096 + 64)
    }

    @Test func serverRefusesAnotherVersionWith426() {
        let server = T.server()
        let request = "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"
        guard case .handshakeFailed = feed(server, Array(request.utf8)) else {
            Issue.record("the request was not refused")
            return
        }
        var response: [UInt8] = []
        _ = server.withPendingOutput { response.append(contentsOf: $0); return $0.count }
        #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 426"))
    }

    @Test(arguments: [
        "POST / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "GET / HTTP/1.1\r\nbad header\r\n\r\n",
    ])
    func serverRefusesMalformedUpgrades(_ request: String) {
        let error = feed(T.server(), Array(request.utf8))
        guard case .handshakeFailed = error else {
            Issue.record("not refused: \(String(describing: error))")
            return
        }
    }

    @Test func clientRefusesAWrongAcceptOrAnUnofferedSubprotocol() throws {
        for response in [
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: wrong\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ] {
            let client = T.client()
            client.start()
            guard case .handshakeFailed = feed(client, Array(response.utf8)) else {
                Issue.record("accepted: \(response)")
                continue
            }
        }
        // A subprotocol the client did not offer.
        let client = T.client { $0.subprotocols = ["a"] }, server = T.server { $0.subprotocols = ["b"] }
        client.start()
        try T.move(client, to: server)
        #expect(server.subprotocol == nil)
        try T.move(server, to: client)
        #expect(client.isOpen && client.subprotocol == nil)
    }

    @Test func skipHandshakeFramesFromTheFirstByte() throws {
        let client = T.client { $0.skipHandshake = true }, server = T.server { $0.skipHandshake = true }
        client.start()
        server.start()
        #expect(client.isOpen && server.isOpen)
        try [UInt8]([9]).withUnsafeBytes { try client.send(.binary, $0) }
        try T.move(client, to: server)
        #expect(T.events(server) == [.opened(subprotocol: nil), .message(.binary, [9])])
    }

    /// Random bytes after the upgrade never crash the engine, and it never holds more than a
    /// message's maximum.
    @Test func randomInputFailsCleanly() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0 ..< 200 {
            let server = try T.openPair(server: { $0.maximumMessageSize = 4096 }).server
            let bytes = (0 ..< Int.random(in: 1 ... 600, using: &generator)).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
            _ = feed(server, bytes)
            _ = T.events(server)
        }
    }
}

extension WebSocketEngineTests {
    /// A peer that pings without reading: automatic pongs stop at the backlog limit.
    @Test func automaticPongsToAFloodOfPingsStayBounded() throws {
        let server = try T.openPair(server: { $0.autoReplyPing = true }).server
        let ping = T.frame(0x9, [UInt8](repeating: 7, count: 125))
        for _ in 0 ..< 5000 { #expect(feed(server, ping) == nil) }
        #expect(server.pendingOutputCount < WebSocketConnection.pongBacklogLimit + 200)
    }
}
