/// Reads frames from bytes that arrive in any pieces, holding at most one header (14 bytes):
/// payload bytes are handed on as they arrive, so the parser never buffers a payload.
/// Checks what a frame's header alone can break: reserved bits (RSV1 allowed on data frames
/// once permessage-deflate is agreed), reserved opcodes, fragmented
/// or oversized control frames, and a 64-bit length with its top bit set.
package struct WebSocketFrameParser: Sendable {
    /// What the parser found in the input, in order.
    package enum Piece {
        /// A frame's header.
        case header(WebSocketFrameHeader)
        /// Payload bytes of the current frame, still masked if the frame is; `offset`: where
        /// they start in the payload.
        case payload(UnsafeRawBufferPointer, offset: UInt64)
        /// The current frame's payload is complete.
        case frameEnd
    }

    /// RSV1 is allowed on data frames: permessage-deflate was agreed (RFC 7692 §6). Whether
    /// it fits the frame (a message's first frame only) is the connection's to check.
    package var allowsCompressedFrames = false
    private var headerBytes: [UInt8] = []
    private var current: WebSocketFrameHeader?
    private var received: UInt64 = 0

    package init() { headerBytes.reserveCapacity(14) }

    /// Parses all of `input`, handing each piece to `handle` as soon as it is found.
    package mutating func parse(
        _ input: UnsafeRawBufferPointer, _ handle: (Piece) throws(WebSocketError) -> Void
    ) throws(WebSocketError) {
        var index = 0
        while index < input.count {
            if let header = current {
                let take = Int(min(UInt64(input.count - index), header.length - received))
                try handle(.payload(UnsafeRawBufferPointer(rebasing: input[index ..< index + take]), offset: received))
                index += take
                received += UInt64(take)
                if received == header.length { try finishFrame(handle) }
                continue
            }
            headerBytes.append(input[index])
            index += 1
            guard let header = try headerIfComplete() else { continue }
            headerBytes.removeAll(keepingCapacity: true)
            current = header
            received = 0
            try handle(.header(header))
            if header.length == 0 { try finishFrame(handle) }
        }
    }

    private mutating func finishFrame(_ handle: (Piece) throws(WebSocketError) -> Void) throws(WebSocketError) {
        current = nil
        received = 0
        try handle(.frameEnd)
    }

    /// The header, once `headerBytes` holds all of it; checked.
    private func headerIfComplete() throws(WebSocketError) -> WebSocketFrameHeader? {
        guard headerBytes.count >= 2 else { return nil }
        let first = headerBytes[0], second = headerBytes[1]
        let masked = second & 0x80 != 0
        let shortLength = second & 0x7F
        let lengthBytes = shortLength == 126 ? 2 : shortLength == 127 ? 8 : 0
        let total = 2 + lengthBytes + (masked ? 4 : 0)
        if headerBytes.count == 2 {
            // Checked as soon as the first two bytes are in, before any more is read.
            let reserved = (first >> 4) & 0x7
            let opcode = first & 0x0F
            guard let known = WebSocketOpcode(rawValue: opcode) else { throw .protocolViolation("a frame used the reserved opcode \(opcode)") }
            let allowed: UInt8 = allowsCompressedFrames && !known.isControl ? 0x4 : 0
            guard reserved & ~allowed == 0 else {
                if allowsCompressedFrames && known.isControl {
                    throw .protocolViolation("a control frame set reserved bits (\(reserved)): control frames are never compressed")
                }
                throw .protocolViolation("a frame set reserved bits (\(reserved)) that no negotiated extension defines")
            }
            if known.isControl {
                guard first & 0x80 != 0 else { throw .protocolViolation("a control frame was fragmented") }
                guard shortLength <= 125 else { throw .protocolViolation("a control frame carried more than 125 bytes") }
            }
        }
        guard headerBytes.count == total else { return nil }
        var length = UInt64(shortLength)
        if lengthBytes > 0 {
            length = 0
            for byte in headerBytes[2 ..< 2 + lengthBytes] { length = length << 8 | UInt64(byte) }
            guard length >> 63 == 0 else { throw .protocolViolation("a frame's 64-bit length had its top bit set") }
        }
        var key: (UInt8, UInt8, UInt8, UInt8)?
        if masked {
            let start = 2 + lengthBytes
            key = (headerBytes[start], headerBytes[start + 1], headerBytes[start + 2], headerBytes[start + 3])
        }
        return WebSocketFrameHeader(fin: first & 0x80 != 0, reserved: (first >> 4) & 0x7, opcode: first & 0x0F, maskKey: key, length: length)
    }
}
