/// One frame's header (RFC 6455 §5.2), as read or to be written.
package struct WebSocketFrameHeader: Sendable, Equatable {
    /// The last frame of its message.
    package var fin: Bool
    /// RSV1 to RSV3, in the low three bits (RSV1 = 0x4: the message is compressed, with
    /// permessage-deflate agreed; the others always zero).
    package var reserved: UInt8
    /// The opcode's four bits (a reserved value is rejected by the parser).
    package var opcode: UInt8
    /// The masking key, present on every client-to-server frame.
    package var maskKey: (UInt8, UInt8, UInt8, UInt8)?
    /// The payload's length.
    package var length: UInt64

    package init(fin: Bool, reserved: UInt8 = 0, opcode: UInt8, maskKey: (UInt8, UInt8, UInt8, UInt8)?, length: UInt64) {
        self.fin = fin
        self.reserved = reserved
        self.opcode = opcode
        self.maskKey = maskKey
        self.length = length
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.fin == rhs.fin && lhs.reserved == rhs.reserved && lhs.opcode == rhs.opcode && lhs.length == rhs.length
            && lhs.maskKey.map { [$0.0, $0.1, $0.2, $0.3] } == rhs.maskKey.map { [$0.0, $0.1, $0.2, $0.3] }
    }

    /// The header's bytes, appended to `output` (2 to 14 bytes, the shortest length form).
    package func write(into output: inout [UInt8]) {
        output.append((fin ? 0x80 : 0) | (reserved & 0x7) << 4 | (opcode & 0x0F))
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        switch length {
        case 0...125:
            output.append(maskBit | UInt8(length))
        case 126...0xFFFF:
            output.append(maskBit | 126)
            output.append(UInt8(length >> 8))
            output.append(UInt8(length & 0xFF))
        default:
            output.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { output.append(UInt8((length >> UInt64(shift)) & 0xFF)) }
        }
        if let key = maskKey { output.append(contentsOf: [key.0, key.1, key.2, key.3]) }
    }

    /// XORs `bytes` with `key`, `offset` bytes into the payload (RFC 6455 §5.3): masking and
    /// unmasking are the same operation.
    package static func mask(_ bytes: UnsafeMutableRawBufferPointer, key: (UInt8, UInt8, UInt8, UInt8), offset: UInt64) {
        let keyBytes = [key.0, key.1, key.2, key.3]
        var phase = Int(offset & 3)
        for index in bytes.indices {
            bytes[index] ^= keyBytes[phase]
            phase = (phase + 1) & 3
        }
    }
}
