import Testing

import BraidWebSocket

/// A message compressed the way no zlib setting does by default: one fixed-Huffman block of
/// literals only, 9 bits for each byte from 144 to 255 (RFC 1951 §3.2.6), so the compressed
/// message is 9/8 of its size. The bound on compressed bytes must let it through at the
/// maximum message size, where a bound of the maximum plus a constant would not.
extension WebSocketDeflateTests {
    /// `bytes` (each 144 or more) as a permessage-deflate message: a fixed-Huffman block of
    /// literals, its end-of-block code, then an empty stored block's header bits and padding,
    /// whose LEN and NLEN (00 00 FF FF) the sender leaves off (RFC 7692 §7.2.1).
    static func fixedHuffmanLiterals(_ bytes: [UInt8]) -> [UInt8] {
        var writer = DeflateBitWriter()
        writer.write(0, bits: 1)  // BFINAL
        writer.write(1, bits: 2)  // BTYPE 01: fixed Huffman codes
        for byte in bytes {
            precondition(byte >= 144, "literals 144-255 take the 9-bit codes")
            writer.writeCode(0b1_1001_0000 + UInt32(byte - 144), bits: 9)
        }
        writer.writeCode(0, bits: 7)  // end of block (256)
        writer.write(0, bits: 1)  // BFINAL
        writer.write(0, bits: 2)  // BTYPE 00: stored
        return writer.finish()
    }

    @Test func fixedHuffmanMessageAtTheMaximumIsDelivered() throws {
        let maximum = 64 * 1024
        let (_, server) = try deflatePair(change: { $0.maximumMessageSize = maximum })
        let message = (0 ..< maximum).map { (index: Int) -> UInt8 in
            let step: Int = (index &* 37 &+ (index >> 7)) % 112
            return UInt8(144 + step)
        }
        let compressed = Self.fixedHuffmanLiterals(message)
        // Larger than the maximum plus any small constant: only the 9/8 bound admits it.
        #expect(compressed.count > maximum + maximum / 9)
        #expect(feed(server, T.frame(0x2, compressed, reserved: 4)) == nil)
        #expect(T.events(server) == [.message(.binary, message)])

        // One byte more is over the maximum once inflated.
        let error = feed(server, T.frame(0x2, Self.fixedHuffmanLiterals(message + [200]), reserved: 4))
        #expect(error?.closeCode == 1009)
    }
}

/// Deflate's bit order: fields least significant bit first, Huffman codes most significant
/// bit first (RFC 1951 §3.1.1).
private struct DeflateBitWriter {
    private var bytes: [UInt8] = []
    private var current: UInt32 = 0
    private var count = 0

    mutating func write(_ value: UInt32, bits: Int) {
        for bit in 0 ..< bits { push((value >> UInt32(bit)) & 1) }
    }

    mutating func writeCode(_ code: UInt32, bits: Int) {
        for bit in (0 ..< bits).reversed() { push((code >> UInt32(bit)) & 1) }
    }

    private mutating func push(_ bit: UInt32) {
        current |= bit << UInt32(count)
        count += 1
        if count == 8 {
            bytes.append(UInt8(current))
            current = 0
            count = 0
        }
    }

    mutating func finish() -> [UInt8] {
        if count > 0 { bytes.append(UInt8(current)) }
        count = 0
        current = 0
        return bytes
    }
}
