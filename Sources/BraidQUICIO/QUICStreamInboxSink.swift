import BraidIO
import BraidQUIC

/// A QUIC stream's receive sink: the engine's callback copies the stream's bytes straight into
/// the inbox's memory (its `InboxWriter`), on the loop and outside the inbox's lock, so they
/// are copied once after decryption and the engine keeps no buffer of its own for the stream.
/// The stream's owner publishes them to the reader after the engine call
/// (`QUICStreamChannel.pull`), so no receive is resumed inside the engine.
///
/// Held by the engine's stream state and by the owner; loop-only, like both.
final class QUICStreamInboxSink: QUICStreamSink {
    let inbox = StreamInbox()
    /// Written by the engine's callbacks, published by the owner. It keeps its chunk while the
    /// stream lives, so a stream holds at most one chunk (up to `largestOwnChunk`) beyond its
    /// unread bytes. Written for every packet, and only ever by the loop, one call at a time
    /// (the engine never calls the sink while the owner publishes), so the run-time exclusivity
    /// check is left out.
    @exclusivity(unchecked) var writer = InboxWriter(largestChunk: StreamInbox.largestOwnChunk)

    func receive(_ bytes: UnsafeRawBufferPointer) {
        // A batch (the bytes between two publications) starts at a chunk's beginning once the
        // reader has caught up, so a receive takes it without a copy.
        writer.write(bytes) { inbox.available == 0 }
    }

    func discardUnread() -> Int {
        writer.discardUnpublished()
    }
}
