/// A frame's opcode (RFC 6455 §5.2). The values not listed are reserved: a frame carrying one
/// fails the connection with close code 1002.
package enum WebSocketOpcode: UInt8, Sendable, Hashable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Close, ping and pong: at most 125 bytes, never fragmented, allowed between the
    /// fragments of a message.
    package var isControl: Bool { rawValue & 0x8 != 0 }
}
