/// A protocol that a `ByteStreamChannel` runs between its transport (below) and its
/// application byte stream (above: the inbox and the outbox), such as TLS: bytes from below
/// come out above as plaintext, plaintext from above goes out below as records. Sans IO, owned
/// by the channel's loop, like the engine it usually wraps.
///
/// The channel moves the bytes and the layer lends it its own memory, so the layer adds no copy
/// of the channel's:
/// - Receiving: `withInputSpace` (the transport reads straight into the layer's input), then
///   `process(deliver:)`, which hands each run of bytes for above to the channel (written into
///   the inbox's memory) and reports what happened.
/// - Sending: `send` takes bytes from above into the layer's output (it may hold a short tail
///   back to share a record with the next send, until `seal`); `withPendingOutput` lends the
///   output to the transport, which writes it in place.
///
/// A failure is thrown (by `process`, `send`, `seal`, `sendEarly` or `endOfInput`) and ends
/// the connection; whatever the layer then has pending (an alert telling the peer why) is
/// written once before the transport closes.
package protocol ByteStreamLayer: AnyObject {
    // MARK: From below

    /// Bytes received from below and not processed yet.
    var bufferedInputCount: Int { get }

    /// Lets the transport write received bytes straight into the layer's input: `body` gets
    /// free space of at least `minimum` bytes and returns how many it wrote. Returns 0 without
    /// calling `body` when the input has less room (call `process` first).
    func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int

    /// Runs the layer over its buffered input: progress (a handshake), and every run of bytes
    /// for above handed to `deliver` in order (valid only during the call).
    func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents

    /// The transport's peer finished: nothing more comes from below. Throws when that is not a
    /// clean end for the layer (TLS without the peer's close_notify: truncation). Returns
    /// whether the layer still holds input it will deliver later (a framer finishing from a
    /// block or a timer of its own): the stream then ends when a later `process` reports
    /// `.peerFinished` (or fails), and the layer bounds how long that takes. False: the stream
    /// ends now.
    func endOfInput() throws -> Bool

    /// The channel's way back for a layer that reported `.awaitingDecision`, or that has work
    /// of its own to do (a framer's timer): calling it (from any thread) has the channel
    /// `process` again on its loop (and read again, after a decision). Set once, on attach.
    var requestProcessing: (@Sendable () -> Void)? { get set }

    /// The loop the channel runs the layer on, set once on attach (before `requestProcessing`):
    /// a layer with timed work of its own (a framer's wakeup) puts it on this loop's timers,
    /// so it runs on the loop's clock and thread. Layers without timers ignore it.
    var eventLoop: EventLoop? { get set }

    // MARK: From above

    /// Whether sends queued before the layer is ready go to `sendEarly` (a resuming TLS client
    /// with early data allowed).
    var sendsEarlyData: Bool { get }

    /// Before the layer's first `process`: takes as much of `bytes` as may travel before it is
    /// ready (0: none).
    func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int

    /// Once ready: takes bytes from above; fewer than offered (0 included) when its output is
    /// full, and the channel writes it before offering the rest again.
    func send(_ bytes: UnsafeRawBufferPointer) throws -> Int

    /// Moves whatever `send` held back into the output; the channel calls it before each
    /// write, so nothing waits in the layer past a pass.
    func seal() throws

    /// Bytes taken from above and not yet written below (the output, and what `send` holds
    /// back): what the channel's outbox counts as held by the engine.
    var heldByteCount: Int { get }

    /// Queues the end of the layer's stream (close_notify); nothing is sent after it.
    /// Idempotent; does nothing once the layer has failed.
    func close()

    /// Whether `close()` has queued the end.
    var isClosed: Bool { get }

    // MARK: To below

    /// Bytes waiting to be written below.
    var pendingOutputCount: Int { get }

    /// Lends the pending output to the transport: `body` writes it (partially if need be) and
    /// returns how many bytes it wrote, which the layer drops. Returns that count.
    func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int

    // MARK: Facts, once ready

    /// The application protocol agreed (ALPN), if any.
    var negotiatedALPN: String? { get }
    /// The layer resumed an earlier session.
    var isResumed: Bool { get }
    /// Client: the peer accepted its early data. Server: it received early data.
    var earlyDataAccepted: Bool { get }
    /// What a security layer agreed (nil: the layer is not one).
    var securityFacts: SecurityFacts? { get }
    /// What an upgrade layer (WebSocket's) agreed (nil: the layer is not one).
    var upgradeFacts: UpgradeFacts? { get }
}

extension ByteStreamLayer {
    package var eventLoop: EventLoop? {
        get { nil }
        set {}
    }
    package var securityFacts: SecurityFacts? { nil }
    package var upgradeFacts: UpgradeFacts? { nil }
}
