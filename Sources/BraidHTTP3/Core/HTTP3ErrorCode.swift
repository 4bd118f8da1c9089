/// The HTTP/3 (RFC 9114 section 8.1) and QPACK (RFC 9204 section 6) error codes, as carried by
/// RESET_STREAM, STOP_SENDING and CONNECTION_CLOSE. A code this list does not name (the peer
/// may send any) is `.other`.
public enum HTTP3ErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// H3_NO_ERROR (0x100): no error; used to close a connection or stream gracefully.
    case noError
    /// H3_GENERAL_PROTOCOL_ERROR (0x101).
    case generalProtocolError
    /// H3_INTERNAL_ERROR (0x102).
    case internalError
    /// H3_STREAM_CREATION_ERROR (0x103): the peer opened a stream it must not.
    case streamCreationError
    /// H3_CLOSED_CRITICAL_STREAM (0x104): a control or QPACK stream was closed.
    case closedCriticalStream
    /// H3_FRAME_UNEXPECTED (0x105): a frame not allowed in the current state or stream.
    case frameUnexpected
    /// H3_FRAME_ERROR (0x106): a frame that does not parse.
    case frameError
    /// H3_EXCESSIVE_LOAD (0x107).
    case excessiveLoad
    /// H3_ID_ERROR (0x108): a stream or push ID used wrongly (e.g. a GOAWAY that grows).
    case idError
    /// H3_SETTINGS_ERROR (0x109).
    case settingsError
    /// H3_MISSING_SETTINGS (0x10a): the control stream did not start with SETTINGS.
    case missingSettings
    /// H3_REQUEST_REJECTED (0x10b): the server did not process the request; retry it.
    case requestRejected
    /// H3_REQUEST_CANCELLED (0x10c).
    case requestCancelled
    /// H3_REQUEST_INCOMPLETE (0x10d).
    case requestIncomplete
    /// H3_MESSAGE_ERROR (0x10e): a malformed message (headers, content-length).
    case messageError
    /// H3_CONNECT_ERROR (0x10f).
    case connectError
    /// H3_VERSION_FALLBACK (0x110).
    case versionFallback
    /// QPACK_DECOMPRESSION_FAILED (0x200).
    case qpackDecompressionFailed
    /// QPACK_ENCODER_STREAM_ERROR (0x201).
    case qpackEncoderStreamError
    /// QPACK_DECODER_STREAM_ERROR (0x202).
    case qpackDecoderStreamError
    /// Any other code.
    case other(UInt64)

    private static let named: [(HTTP3ErrorCode, UInt64, String)] = [
        (.noError, 0x100, "H3_NO_ERROR"),
        (.generalProtocolError, 0x101, "H3_GENERAL_PROTOCOL_ERROR"),
        (.internalError, 0x102, "H3_INTERNAL_ERROR"),
        (.streamCreationError, 0x103, "H3_STREAM_CREATION_ERROR"),
        (.closedCriticalStream, 0x104, "H3_CLOSED_CRITICAL_STREAM"),
        (.frameUnexpected, 0x105, "H3_FRAME_UNEXPECTED"),
        (.frameError, 0x106, "H3_FRAME_ERROR"),
        (.excessiveLoad, 0x107, "H3_EXCESSIVE_LOAD"),
        (.idError, 0x108, "H3_ID_ERROR"),
        (.settingsError, 0x109, "H3_SETTINGS_ERROR"),
        (.missingSettings, 0x10a, "H3_MISSING_SETTINGS"),
        (.requestRejected, 0x10b, "H3_REQUEST_REJECTED"),
        (.requestCancelled, 0x10c, "H3_REQUEST_CANCELLED"),
        (.requestIncomplete, 0x10d, "H3_REQUEST_INCOMPLETE"),
        (.messageError, 0x10e, "H3_MESSAGE_ERROR"),
        (.connectError, 0x10f, "H3_CONNECT_ERROR"),
        (.versionFallback, 0x110, "H3_VERSION_FALLBACK"),
        (.qpackDecompressionFailed, 0x200, "QPACK_DECOMPRESSION_FAILED"),
        (.qpackEncoderStreamError, 0x201, "QPACK_ENCODER_STREAM_ERROR"),
        (.qpackDecoderStreamError, 0x202, "QPACK_DECODER_STREAM_ERROR"),
    ]

    /// The code on the wire.
    public init(code: UInt64) {
        self = Self.named.first { $0.1 == code }?.0 ?? .other(code)
    }

    /// The code on the wire.
    public var code: UInt64 {
        if case .other(let code) = self { return code }
        return Self.named.first { $0.0 == self }!.1
    }

    /// The RFC's name (`H3_FRAME_UNEXPECTED`), or the code in hex for others.
    public var name: String {
        if case .other(let code) = self { return "0x" + String(code, radix: 16) }
        return Self.named.first { $0.0 == self }!.2
    }

    public var description: String { name }
}
