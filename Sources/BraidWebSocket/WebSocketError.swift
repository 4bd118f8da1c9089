/// Why a WebSocket engine failed. Each failure the peer caused carries the close code the
/// engine sent it (`closeCode`) before failing.
package enum WebSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The upgrade request or response was malformed or refused (`reason` says which part).
    case handshakeFailed(String)
    /// The upgrade's header block passed `limit` bytes without ending.
    case handshakeTooLarge(limit: Int)
    /// The peer broke the framing rules: close code 1002.
    case protocolViolation(String)
    /// A text message or close reason was not valid UTF-8: close code 1007.
    case invalidUTF8
    /// A compressed message (permessage-deflate) did not inflate: close code 1007.
    case compressedDataInvalid(String)
    /// A message grew past the maximum: close code 1009.
    case messageTooLarge(size: Int, maximum: Int)
    /// A control frame to send was larger than 125 bytes.
    case controlFrameTooLarge(Int)

    /// The close code sent to the peer for this failure (nil: the handshake had not
    /// completed, so no frame could be sent).
    package var closeCode: UInt16? {
        switch self {
        case .handshakeFailed, .handshakeTooLarge: nil
        case .protocolViolation, .controlFrameTooLarge: 1002
        case .invalidUTF8, .compressedDataInvalid: 1007
        case .messageTooLarge: 1009
        }
    }

    package var description: String {
        switch self {
        case .handshakeFailed(let reason): "WebSocket handshake failed: \(reason)"
        case .handshakeTooLarge(let limit): "WebSocket handshake failed: the peer's HTTP header block passed \(limit) bytes"
        case .protocolViolation(let reason): "WebSocket protocol error (close code 1002): \(reason)"
        case .invalidUTF8: "WebSocket text was not valid UTF-8 (close code 1007)"
        case .compressedDataInvalid(let reason): "a compressed WebSocket message did not inflate (close code 1007): \(reason)"
        case .messageTooLarge(let size, let maximum):
            "WebSocket message of at least \(size) bytes is larger than the maximum, \(maximum) (close code 1009); raise WebSocket.maximumMessageSize if the peer is trusted"
        case .controlFrameTooLarge(let count): "a WebSocket control frame carries at most 125 bytes, not \(count)"
        }
    }
}
