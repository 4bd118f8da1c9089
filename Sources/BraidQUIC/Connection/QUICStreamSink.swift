/// Where a stream's received bytes go in place of the engine's own receive buffer: the stream's
/// owner installs one (`openStream(bidirectional:sink:)`, `makeStreamSink`, `installSink`) so
/// ngtcp2's bytes are copied once, straight into the memory the application reads from.
///
/// The engine calls it inside its receive, on the owner's thread, from ngtcp2's callbacks: an
/// implementation copies and counts, and leaves everything else (handing bytes to a reader,
/// waking it) for after the engine call, when the owner hears `streamReadable` and calls
/// `read(streamID:...)`, which then reports the FIN or the peer's reset as it does for bytes
/// in the engine's buffer. Flow-control credit is never returned for bytes the sink takes:
/// the owner returns it as they are consumed (`returnCredit(streamID:bytes:)`).
package protocol QUICStreamSink: AnyObject {
    /// The stream's next bytes, in order; valid only during the call.
    func receive(_ bytes: UnsafeRawBufferPointer)
    /// Drops the bytes received since the owner's last `read` (the peer reset the stream, or
    /// we stopped it); returns how many, whose connection credit the engine then returns.
    func discardUnread() -> Int
}
