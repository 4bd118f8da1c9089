import Testing
@testable import BraidTLS

/// The ciphertext buffers hold memory only while bytes are in them.
@Suite(.ownThread) struct TLSBufferMemoryTests {
    func holdsMemory(_ end: TLSEnd) -> Bool {
        end.connection.input.holdsStorage || end.connection.output.holdsStorage
    }

    @Test func anIdleConnectionHoldsNoBufferMemory() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        #expect(!holdsMemory(pair.client) && !holdsMemory(pair.server))
        pair.run()
        try #require(pair.client.connection.isHandshakeComplete && pair.server.connection.isHandshakeComplete)
        #expect(!holdsMemory(pair.client) && !holdsMemory(pair.server))
        // A bulk transfer each way, then idle again.
        let payload = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        pair.client.outgoing = payload
        pair.server.outgoing = payload
        pair.run()
        #expect(pair.server.received == payload && pair.client.received == payload)
        #expect(!holdsMemory(pair.client) && !holdsMemory(pair.server))
    }

    @Test func aPartialRecordLeavesNoInputMemory() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        pair.run()
        pair.client.outgoing = [UInt8](repeating: 3, count: 100)
        pair.client.flushOutgoing()
        var record = [UInt8]()
        pair.client.connection.withPendingCiphertext { record = Array($0); return $0.count }
        #expect(!pair.client.connection.output.holdsStorage)
        // Half a record: GnuTLS takes the bytes into its own record buffer, the input is empty.
        _ = record.withUnsafeBytes { pair.server.connection.receiveCiphertext(UnsafeRawBufferPointer(rebasing: $0[..<50])) }
        pair.server.process()
        #expect(pair.server.received.isEmpty)
        #expect(!pair.server.connection.input.holdsStorage)
        _ = record.withUnsafeBytes { pair.server.connection.receiveCiphertext(UnsafeRawBufferPointer(rebasing: $0[50...])) }
        pair.server.process()
        #expect(pair.server.received.count == 100)
        #expect(!pair.server.connection.input.holdsStorage)
        // A read that brings nothing gives the block it was offered back at once.
        pair.server.connection.withInputSpace { _ in 0 }
        #expect(!pair.server.connection.input.holdsStorage)
    }

    @Test func aBurstBeyondTheBlockGrowsTheOutputAndFreesItWhenDrained() {
        let buffer = CiphertextBuffer(blockCapacity: 1024)
        let bytes = [UInt8](repeating: 9, count: 3000)
        bytes.withUnsafeBytes { buffer.append($0.baseAddress!, count: 1000) }
        #expect(buffer.capacity == 1024)
        bytes.withUnsafeBytes { buffer.append($0.baseAddress!, count: 3000) }
        #expect(buffer.count == 4000 && buffer.capacity >= 4000)
        var out = [UInt8](repeating: 0, count: 4000)
        #expect(out.withUnsafeMutableBytes { buffer.read(into: $0.baseAddress!, count: 4000) } == 4000)
        #expect(!buffer.holdsStorage && buffer.capacity == 0)
    }
}
