/// Errors of the byte-stream channel itself.
package enum ByteStreamError: Error, Sendable, Equatable {
    /// The channel's layer (TLS) did not become ready (complete its handshake) in time.
    case handshakeTimedOut(Duration)
}
