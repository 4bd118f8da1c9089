/// A protocol that a `DatagramChannel` runs between its socket (below) and its messages
/// (above), such as DTLS: datagrams from below come out above as messages, each message from
/// above goes out below as one datagram. Sans IO, owned by the channel's loop.
///
/// The channel is ready when the layer is (`process` returns true), not when it has a socket.
/// A failure is thrown (by `start`, `process` or `seal`) and ends the connection; whatever the
/// layer then has pending (an alert telling the peer why) is sent first.
package protocol DatagramLayer: AnyObject {
    /// The channel has a socket: the layer may queue its first datagrams (a ClientHello).
    func start() throws

    /// A datagram from the peer, for the next `process`. False: the layer is full and did not
    /// take it (the channel runs `process` and offers it again, and counts it dropped if the
    /// layer still cannot take it).
    func receive(_ datagram: UnsafeRawBufferPointer) -> Bool

    /// The channel's way back for a layer waiting on a decision made off the loop (an
    /// application's verdict on the peer's certificate): calling it, from any thread, has the
    /// channel run `process` again on its loop. Set once, on start.
    var requestProcessing: (@Sendable () -> Void)? { get set }

    /// How long the layer may take to become ready once the channel has a socket, a wait for
    /// a decision included; the channel then fails with `DatagramChannelError.handshakeTimedOut`.
    var handshakeTimeout: Duration { get }

    /// Runs the layer over what it received (and over its timers, once `timeout` has passed),
    /// handing each message for above to `deliver`. Returns whether the layer is ready.
    func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> Bool

    /// Once ready: one message from above, as one datagram below. Throws when it is larger than
    /// `maximumMessageSize`.
    func seal(_ message: UnsafeRawBufferPointer) throws

    /// The largest message `seal` takes (what one datagram carries after the layer's framing).
    var maximumMessageSize: Int { get }

    /// The next datagram to send below, removed from the layer (nil: none).
    func popOutput() -> [UInt8]?

    /// How long until the layer wants `process` called again without new input (a
    /// retransmission), nil when it waits for nothing.
    var timeout: Duration? { get }

    /// Bytes the layer holds in its queues: datagrams received and not yet processed, and
    /// datagrams to send (a listener's buffer limit counts them).
    var bufferedBytes: Int { get }

    /// Queues the end of the layer's stream (close_notify). Idempotent.
    func close()

    /// The peer ended the layer's session (DTLS close_notify): after delivering what came
    /// before it, the channel answers with its own end and closes.
    var peerClosed: Bool { get }

    /// The application protocol agreed (ALPN), once ready.
    var negotiatedALPN: String? { get }

    /// What the layer's handshake agreed and showed of the peer (its certificates), once
    /// ready; nil for a layer without one.
    var securityFacts: SecurityFacts? { get }
}
