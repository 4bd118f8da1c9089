/// What the queues between callers and a loop report themselves; the public layer turns these
/// into its own error type, as it does with engine and datapath errors.
package enum StreamBridgeError: Error, Equatable, Sendable {
    /// The stream ended after `received` bytes where an exact receive wanted `wanted`.
    case unexpectedEndOfStream(received: Int, wanted: Int)
    /// The stream's sending side has ended (its end of stream is queued).
    case notWritable
}
