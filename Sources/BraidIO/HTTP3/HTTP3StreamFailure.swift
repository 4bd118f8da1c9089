import BraidHTTP3

/// A request stream the peer ended (RESET_STREAM, STOP_SENDING) or that broke the protocol
/// (a malformed header section), with its HTTP/3 error code.
package struct HTTP3StreamFailure: Error, Sendable, Hashable, CustomStringConvertible {
    package var streamID: Int64
    package var code: HTTP3ErrorCode

    package init(streamID: Int64, code: HTTP3ErrorCode) {
        self.streamID = streamID
        self.code = code
    }

    package var description: String { "HTTP/3 stream \(streamID) ended with \(code)" }
}
