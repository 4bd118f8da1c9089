import BraidHTTP3
import Testing

/// The H3 and QPACK error codes by name, both ways, and which failures are retryable.
@Suite struct HTTP3ErrorCodeTests {
    @Test func codesRoundTripWithTheirRFCNames() {
        let expected: [(UInt64, String)] = [
            (0x100, "H3_NO_ERROR"), (0x101, "H3_GENERAL_PROTOCOL_ERROR"), (0x102, "H3_INTERNAL_ERROR"),
            (0x103, "H3_STREAM_CREATION_ERROR"), (0x104, "H3_CLOSED_CRITICAL_STREAM"), (0x105, "H3_FRAME_UNEXPECTED"),
            (0x106, "H3_FRAME_ERROR"), (0x107, "H3_EXCESSIVE_LOAD"), (0x108, "H3_ID_ERROR"), (0x109, "H3_SETTINGS_ERROR"),
            (0x10a, "H3_MISSING_SETTINGS"), (0x10b, "H3_REQUEST_REJECTED"), (0x10c, "H3_REQUEST_CANCELLED"),
            (0x10d, "H3_REQUEST_INCOMPLETE"), (0x10e, "H3_MESSAGE_ERROR"), (0x10f, "H3_CONNECT_ERROR"),
            (0x110, "H3_VERSION_FALLBACK"), (0x200, "QPACK_DECOMPRESSION_FAILED"), (0x201, "QPACK_ENCODER_STREAM_ERROR"),
            (0x202, "QPACK_DECODER_STREAM_ERROR"),
        ]
        for (code, name) in expected {
            let error = HTTP3ErrorCode(code: code)
            #expect(error.code == code)
            #expect(error.name == name)
            #expect(error != .other(code))
        }
        #expect(HTTP3ErrorCode(code: 0x1f) == .other(0x1f))
        #expect(HTTP3ErrorCode(code: 0x1f).name == "0x1f")
        #expect(HTTP3ErrorCode.other(0x1f).code == 0x1f)
    }

    @Test func onlyUnprocessedRequestsAreRetryable() {
        #expect(HTTP3Error.goingAway(lastStreamID: 8).isRetryable)
        #expect(HTTP3Error.requestRejected(streamID: 4).isRetryable)
        #expect(!HTTP3Error.connectionError(.messageError, reason: "", byPeer: true).isRetryable)
        #expect(!HTTP3Error.invalidStream(streamID: 0, reason: "").isRetryable)
    }
}
