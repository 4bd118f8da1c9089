/// Something the application should know about, produced while the engine handles input.
///
/// Per-packet happenings are coalesced: `streamReadable` is raised once until the application
/// reads from that stream, and once more if `QUICConnection.promptReadThreshold` bytes pile up
/// unread meanwhile, so a 10 MB transfer does not produce thousands of events.
package enum QUICEvent: Sendable, Hashable {
    /// The handshake completed; `negotiatedALPN` and `earlyDataAccepted` are now set.
    case handshakeCompleted
    /// The peer opened this stream.
    case streamOpened(streamID: Int64)
    /// Bytes, the FIN or a reset can be read from this stream.
    case streamReadable(streamID: Int64)
    /// The stream may queue bytes again: its unacknowledged bytes fell below its send-buffer
    /// limit, or room under the connection's send budget came back to the streams waiting
    /// for it (`sendRoom`).
    case streamWritable(streamID: Int64)
    /// The peer asked us to stop sending (STOP_SENDING); further sends fail. ngtcp2 0.12.1
    /// reports the peer's code only once the stream closes, so `code` may be nil when the stop
    /// is first noticed by a failing write; a later event then carries it.
    case streamStopSending(streamID: Int64, code: UInt64?)
    /// Both directions of the stream are finished and its state is gone.
    case streamClosed(streamID: Int64)
    /// The peer allows more streams to be opened (after `streamLimitReached`).
    case streamsAvailable
    /// An RFC 9221 datagram arrived; `early` if it came in 0-RTT.
    case datagramReceived(bytes: [UInt8], early: Bool)
    /// The connection's `datagramSink` took datagrams: raised once until polled, however many
    /// it took meanwhile (without a sink, each datagram is a `datagramReceived`).
    case datagramsReceived
    /// A datagram we sent was acknowledged.
    case datagramAcknowledged(id: UInt64)
    /// A datagram we sent was declared lost (datagrams are never retransmitted).
    case datagramLost(id: UInt64)
    /// Datagrams we sent were acknowledged or declared lost, with
    /// `QUICConnection.reportsEachDatagramOutcome` off: raised once until polled, however many
    /// settled meanwhile (the lost ones are counted in `statistics.datagramsLost` either way).
    case datagramsSettled
    /// The server sent material to resume a later connection (store it per server name).
    case resumptionTicket(QUICResumptionTicket)
    /// The server refused our 0-RTT data; the engine resent it after the handshake.
    case earlyDataRejected
    /// The connection is closing or draining; no more application data moves.
    case connectionClosed(QUICError)
    /// All state is gone: the owner can drop the connection.
    case terminated
}
