import Testing
import BraidTLS

/// Ending a connection: close_notify, truncation, and fatal alerts on damaged records.
@Suite struct TLSCloseTests {
    func establishedPair() throws -> TLSPair {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        pair.run()
        try #require(pair.client.connection.isHandshakeComplete && pair.server.connection.isHandshakeComplete)
        return pair
    }

    @Test func closeNotifyIsACleanEnd() throws {
        let pair = try establishedPair()
        pair.client.outgoing = Array("last words".utf8)
        pair.client.flushOutgoing()
        pair.client.connection.close()
        pair.run()
        #expect(pair.server.events.last == .peerClosed)
        #expect(String(decoding: pair.server.received, as: UTF8.self) == "last words")
        try pair.server.connection.endOfInput()
        // Half-close: the server may still answer before closing its side.
        pair.server.outgoing = Array("goodbye".utf8)
        pair.server.flushOutgoing()
        pair.server.connection.close()
        pair.run()
        #expect(String(decoding: pair.client.received, as: UTF8.self) == "goodbye")
        #expect(pair.client.events.last == .peerClosed)
        #expect(throws: TLSError.self) { try [UInt8](repeating: 0, count: 1).withUnsafeBytes { try pair.client.connection.send($0) } }
    }

    @Test func endWithoutCloseNotifyIsTruncation() throws {
        let pair = try establishedPair()
        pair.client.outgoing = Array("partial".utf8)
        pair.client.flushOutgoing()
        pair.run()
        #expect(pair.server.received.count == 7)
        #expect(throws: TLSError.truncated) { try pair.server.connection.endOfInput() }
        #expect(pair.server.connection.failure == .truncated)
    }

    @Test func endInTheMiddleOfTheHandshakeIsTruncation() throws {
        let connection = try TLSConnection.client(context: TLSFixtures.client(), serverName: "localhost")
        _ = try connection.process { _ in }
        #expect(throws: TLSError.truncated) { try connection.endOfInput() }
    }

    @Test func damagedRecordFailsWithBadRecordMACOnBothEnds() throws {
        let pair = try establishedPair()
        _ = try Array("tampered".utf8).withUnsafeBytes { try pair.client.connection.send($0) }
        // Flip a bit in the record's ciphertext on the wire.
        pair.client.connection.withPendingCiphertext { bytes in
            var copy = Array(bytes)
            copy[copy.count - 1] ^= 0x01
            _ = copy.withUnsafeBytes { pair.server.connection.receiveCiphertext($0) }
            return bytes.count
        }
        pair.server.process()
        #expect(pair.server.received.isEmpty)
        if case .protocolError = pair.server.error {} else { Issue.record("server error \(String(describing: pair.server.error))") }
        // The server queued the alert; the client learns why.
        #expect(pair.server.connection.pendingCiphertextCount > 0)
        pair.run()
        #expect(pair.client.error == .peerAlert(code: 20, name: "bad_record_mac"))
    }

    @Test func garbageInsteadOfAHandshakeFailsWithAnAlert() throws {
        let server = try TLSConnection.server(context: TLSFixtures.server())
        _ = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes { server.receiveCiphertext($0) }
        #expect(throws: TLSError.self) { try server.process { _ in } }
        if case .handshakeFailed = server.failure {} else { Issue.record("server failure \(String(describing: server.failure))") }
        #expect(server.pendingCiphertextCount > 0)
    }
}
