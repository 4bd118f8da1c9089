/// The name RFC 9000 §20.1 (and RFC 9368 for 0x11) gives a QUIC transport error code, for
/// messages: `STREAM_LIMIT_ERROR` says more than `0x4`. Nil for codes with no name (a TLS alert
/// in 0x100...0x1ff is `CRYPTO_ERROR`).
package func quicTransportErrorName(_ code: UInt64) -> String? {
    switch code {
    case 0x0: "NO_ERROR"
    case 0x1: "INTERNAL_ERROR"
    case 0x2: "CONNECTION_REFUSED"
    case 0x3: "FLOW_CONTROL_ERROR"
    case 0x4: "STREAM_LIMIT_ERROR"
    case 0x5: "STREAM_STATE_ERROR"
    case 0x6: "FINAL_SIZE_ERROR"
    case 0x7: "FRAME_ENCODING_ERROR"
    case 0x8: "TRANSPORT_PARAMETER_ERROR"
    case 0x9: "CONNECTION_ID_LIMIT_ERROR"
    case 0xa: "PROTOCOL_VIOLATION"
    case 0xb: "INVALID_TOKEN"
    case 0xc: "APPLICATION_ERROR"
    case 0xd: "CRYPTO_BUFFER_EXCEEDED"
    case 0xe: "KEY_UPDATE_ERROR"
    case 0xf: "AEAD_LIMIT_REACHED"
    case 0x10: "NO_VIABLE_PATH"
    case 0x11: "VERSION_NEGOTIATION_ERROR"
    case 0x100...0x1ff: "CRYPTO_ERROR"
    default: nil
    }
}

/// `0x4 (STREAM_LIMIT_ERROR)`, or just `0x...` for a code without a name.
package func quicTransportErrorLabel(_ code: UInt64) -> String {
    let hex = "0x\(String(code, radix: 16))"
    return quicTransportErrorName(code).map { "\(hex) (\($0))" } ?? hex
}
