import BraidHTTP3
import BraidIO

/// A request stream the peer ended (RESET_STREAM, STOP_SENDING: `byPeer`) or whose message
/// from the peer broke the protocol (a malformed or oversized header section: the engine
/// ended the stream), with its HTTP/3 error code.
package struct HTTP3StreamFailure: Error, Sendable, Hashable, CustomStringConvertible {
    package var streamID: Int64
    package var code: HTTP3ErrorCode
    package var byPeer: Bool

    package init(streamID: Int64, code: HTTP3ErrorCode, byPeer: Bool = true) {
        self.streamID = streamID
        self.code = code
        self.byPeer = byPeer
    }

    package var description: String {
        byPeer
            ? "HTTP/3 stream \(streamID) ended by the peer with \(code)"
            : "the peer's HTTP/3 message on stream \(streamID) broke the protocol; the stream was ended with \(code)"
    }
}
