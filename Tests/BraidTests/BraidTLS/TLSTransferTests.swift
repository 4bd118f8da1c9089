import Testing
import BraidTLS

/// Bulk data through the engines: integrity, backpressure and the input bound.
@Suite(.ownThread) struct TLSTransferTests {
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

    /// A hundred 100-byte sends through `sendCoalescing` leave in one record once sealed, not a
    /// hundred; they arrive whole and in order, and a plain `send` and `close` seal what waits
    /// before their own bytes.
    @Test func smallSendsShareRecords() throws {
        let pair = try establishedPair()
        let client = pair.client.connection
        let messages = (0..<100).map { pattern(seed: UInt64($0), count: 100) }
        for message in messages {
            #expect(try message.withUnsafeBytes { try client.sendCoalescing($0) } == 100)
        }
        #expect(client.coalescedPlaintextCount == 10_000)
        #expect(client.pendingCiphertextCount == 0)
        try client.sealCoalesced()
        #expect(client.coalescedPlaintextCount == 0)
        // One record: a 5-byte header, the content type byte and a 16-byte tag (TLS 1.3).
        #expect(client.pendingCiphertextCount == 10_000 + 22)

        // Staged bytes go before a plain send's and before close_notify.
        #expect(try Array("a".utf8).withUnsafeBytes { try client.sendCoalescing($0) } == 1)
        #expect(try Array("b".utf8).withUnsafeBytes { try client.send($0) } == 1)
        #expect(try Array("c".utf8).withUnsafeBytes { try client.sendCoalescing($0) } == 1)
        client.close()
        #expect(client.coalescedPlaintextCount == 0)
        pair.run()
        #expect(pair.server.received == messages.flatMap { $0 } + Array("abc".utf8))
        #expect(pair.server.events.last == .peerClosed)
    }

    /// A piece of at least `directSealMinimum` bytes with nothing waiting is sealed as its own
    /// record at once (no copy into the waiting record); a smaller one after it waits, and
    /// everything arrives in order.
    @Test func largePiecesAreSealedWithoutWaiting() throws {
        let pair = try establishedPair()
        let client = pair.client.connection
        let block = pattern(seed: 5, count: TLSConnection.directSealMinimum + 1000)
        let small = pattern(seed: 6, count: 500)
        #expect(try block.withUnsafeBytes { try client.sendCoalescing($0) } == block.count)
        #expect(client.coalescedPlaintextCount == 0)
        // One record: a 5-byte header, the content type byte and a 16-byte tag (TLS 1.3).
        #expect(client.pendingCiphertextCount == block.count + 22)
        #expect(try small.withUnsafeBytes { try client.sendCoalescing($0) } == small.count)
        #expect(client.coalescedPlaintextCount == small.count)
        // Behind waiting bytes, even a large piece waits with them (order holds).
        #expect(try block.withUnsafeBytes { try client.sendCoalescing($0) } == block.count)
        #expect(client.coalescedPlaintextCount == small.count + block.count)
        try client.sealCoalesced()
        pair.run()
        #expect(pair.server.received == block + small + block)
    }

    /// Past a record's worth, sends go out in full records straight away; what waits never
    /// exceeds one record, and the pending-ciphertext bound still stops the sender.
    @Test func coalescingSendsKeepTheBounds() throws {
        let pair = try establishedPair()
        let client = pair.client.connection
        let chunk = pattern(seed: 3, count: 3000)
        let handshakeBytes = pair.bytesToServer
        var sent: [UInt8] = []
        while true {
            let taken = try chunk.withUnsafeBytes { try client.sendCoalescing($0) }
            sent += chunk[0..<taken]
            #expect(client.coalescedPlaintextCount <= 16384)
            if taken < chunk.count { break }
        }
        #expect(client.pendingCiphertextCount >= TLSConnection.pendingCiphertextLimit)
        #expect(try chunk.withUnsafeBytes { try client.sendCoalescing($0) } == 0)
        try client.sealCoalesced()
        pair.run()
        #expect(pair.server.received == sent)
        // Full records (each 16,406 bytes with its header and tag; the last one may be short).
        #expect(pair.bytesToServer - handshakeBytes <= sent.count + (sent.count / 16384 + 1) * 22)
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
