import Testing
import BraidTLS

/// Bulk data through the engines: integrity, backpressure and the input bound.
@Suite struct TLSTransferTests {
    func establishedPair(configure: (inout TLSClientConfiguration) -> Void = { _ in }) throws -> TLSPair {
        let pair = try TLSPair(client: TLSFixtures.client(configure: configure), server: TLSFixtures.server())
        pair.run()
        try #require(pair.client.connection.isHandshakeComplete && pair.server.connection.isHandshakeComplete)
        return pair
    }

    @Test(arguments: [TLSVersion.v1_3, .v1_2])
    func tenMegabytesEchoedByteForByte(version: TLSVersion) throws {
        let pair = try establishedPair { $0.maximumVersion = version }
        // The server echoes whatever it receives, through send's backpressure.
        pair.server.onData = { end, bytes in end.outgoing.append(contentsOf: bytes) }
        let payload = pattern(seed: 7, count: 10_000_000)
        pair.client.outgoing = payload
        pair.client.flushOutgoing()
        pair.run()
        #expect(pair.client.error == nil)
        #expect(pair.server.error == nil)
        #expect(pair.server.received.count == payload.count)
        #expect(firstDifference(pair.server.received, payload) == nil)
        #expect(firstDifference(pair.client.received, payload) == nil)
        // Full-size records: ciphertext overhead stays small.
        #expect(pair.bytesToServer < payload.count + payload.count / 100 + 10_000)
    }

    @Test func sendStopsAtThePendingCiphertextLimit() throws {
        let pair = try establishedPair()
        let big = [UInt8](repeating: 0x5a, count: 1_000_000)
        let taken = try big.withUnsafeBytes { try pair.client.connection.send($0) }
        #expect(taken < big.count)
        #expect(taken >= TLSConnection.pendingCiphertextLimit - 16384)
        #expect(pair.client.connection.pendingCiphertextCount >= TLSConnection.pendingCiphertextLimit)
        // Nothing more is taken until the output drains.
        #expect(try big.withUnsafeBytes { try pair.client.connection.send($0) } == 0)
        // A partial write drops exactly what was written.
        let before = pair.client.connection.pendingCiphertextCount
        let written = pair.client.connection.withPendingCiphertext { min($0.count, 1000) }
        #expect(written == 1000)
        #expect(pair.client.connection.pendingCiphertextCount == before - 1000)
    }

    @Test func inputIsBoundedUntilProcessed() throws {
        let pair = try establishedPair()
        pair.client.outgoing = [UInt8](repeating: 1, count: 300_000)
        var offered = 0
        // Fill the server's input without processing it.
        while true {
            pair.client.flushOutgoing()
            let n = pair.client.connection.withPendingCiphertext { pair.server.connection.receiveCiphertext($0) }
            if n == 0 { break }
            offered += n
        }
        #expect(pair.server.connection.bufferedCiphertextCount == TLSConnection.inputCapacity)
        #expect(pair.server.connection.withInputSpace(minimum: 1) { _ in Issue.record("no room expected"); return 0 } == 0)
        pair.server.process()
        #expect(pair.server.connection.bufferedCiphertextCount < TLSConnection.inputCapacity / 2)
        // Processing made room for another full-size socket read.
        var called = false
        pair.server.connection.withInputSpace(minimum: 16384) { space in
            called = space.count >= 16384
            return 0
        }
        #expect(called)
        pair.run()
        #expect(pair.server.received.count == 300_000)
        #expect(offered >= TLSConnection.inputCapacity)
    }
}
