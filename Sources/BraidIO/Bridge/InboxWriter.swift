import BraidCore
import DequeModule

/// Where a stream's received bytes are written before a `StreamInbox` publishes them: chunks of
/// memory that never move (`StreamBytes`, from `StreamBlockPool`), written in order by one
/// producer, the stream's loop.
///
/// The producer writes into `space` (a socket read straight into it, or `write` copying a
/// decrypted TLS record or a QUIC stream's bytes from the engine's callback), outside the
/// inbox's lock; `StreamInbox.fill(publishing:)` then hands the written runs to the inbox in
/// one lock round. A receive that takes a large run gets it as a `Data` over the chunk itself,
/// without a copy (see `StreamInbox`), so bytes read from a socket reach the application with
/// the kernel's copy only, and a QUIC stream's with the engine's one copy after decryption.
///
/// Chunks grow from `smallestChunk` (a page) to `largestChunk`, doubling each time one fills: a
/// stream that carries little holds a small chunk, a bulk one reads up to `largestChunk` per
/// system call. A full chunk is left to the inbox, which lets it go once its bytes are read; so
/// is the current one when the owner releases it (`releaseChunk`). A stream that carries
/// little holds at most a page beyond its unread bytes.
package struct InboxWriter {
    /// A written run of one chunk, published to the inbox or about to be.
    package struct Segment {
        package let chunk: StreamBytes
        package var start: Int
        package var end: Int
        package var count: Int { end - start }
    }

    /// The first chunk's size: a page, so a peer that sends a few bytes on each of many streams
    /// (or connections) makes each hold a page, not a pool block.
    package static let smallestChunk = 4 * 1024
    package let largestChunk: Int
    private var chunk: StreamBytes?
    /// Bytes of `chunk` written so far, and how many of those the inbox has.
    private var written = 0
    private var published = 0
    /// Written runs of earlier chunks the inbox does not have yet.
    private var retired: [Segment] = []
    private var nextChunkSize = InboxWriter.smallestChunk
    /// Set by `reserve`: what the next write that needs memory makes room for in one chunk.
    private var reservation = 0

    package init(largestChunk: Int) {
        self.largestChunk = max(largestChunk, Self.smallestChunk)
    }

    /// Whether bytes were written that the inbox does not have yet.
    package var hasUnpublished: Bool { written > published || !retired.isEmpty }

    /// Free memory at the end of the current chunk, at least `minimum` bytes (a new chunk when
    /// the current one has less). Write from its start, then call `didWrite`.
    package mutating func space(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if reservation > 0 {
            let needed = max(reservation, minimum)
            reservation = 0
            if (chunk?.count ?? 0) - written < needed {
                retireChunk()
                chunk = StreamBytes(capacity: max(needed, Self.smallestChunk))
            }
        }
        if let chunk, chunk.count - written >= max(minimum, 1) {
            return UnsafeMutableRawBufferPointer(rebasing: chunk.base[written...])
        }
        // Larger chunks only for a stream that fills them, not one that was released.
        if chunk != nil { nextChunkSize = min(nextChunkSize * 2, largestChunk) }
        retireChunk()
        let size = max(minimum, nextChunkSize)
        let fresh = StreamBytes(capacity: size)
        chunk = fresh
        return fresh.base
    }

    /// Makes up to `count` bytes written next land in one chunk: a new one of `count` bytes
    /// when the current one has less room. For a producer that knows how much may come (TLS
    /// decrypting what it has buffered), so a receive can take the batch whole, without a copy.
    /// The chunk is made at the first write, so a batch with no plaintext (a handshake, a
    /// ticket) takes no memory; the next `reserve` replaces an unused one.
    package mutating func reserve(_ count: Int) {
        reservation = count
    }

    /// The producer wrote `count` bytes at the start of the last `space`.
    package mutating func didWrite(_ count: Int) {
        written += count
    }

    /// Copies `region` in, across chunks when the current one is nearly full.
    package mutating func write(_ region: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < region.count {
            let space = space(minimum: 1)
            let count = min(space.count, region.count - offset)
            space.baseAddress!.copyMemory(from: region.baseAddress! + offset, byteCount: count)
            didWrite(count)
            offset += count
        }
    }

    /// Copies `region` in as `write` does, for a producer that publishes its writes in batches
    /// (a QUIC stream's sink, at each `streamReadable`) and keeps its chunk while the stream
    /// lives. The first write of a batch starts at a chunk's beginning once the reader has read
    /// everything published: the current chunk's, written again, when nobody else holds any of
    /// it (no unread run, no receive's `Data`: the reader has read all of it), else a fresh
    /// chunk's when `readerCaughtUp` says so. The batch is then one run a receive takes without
    /// a copy, not a run after the read bytes that may cross the chunk's end and be gathered
    /// with a copy; and a stream whose reader keeps up reuses one chunk instead of taking a new
    /// one per batch (many streams' new chunks outran the block pool and cost page faults).
    package mutating func write(_ region: UnsafeRawBufferPointer, startingBatch readerCaughtUp: () -> Bool) {
        if chunk != nil && !hasUnpublished {
            if isKnownUniquelyReferenced(&chunk) {
                written = 0
                published = 0
            } else if readerCaughtUp() {
                retireChunk()
            }
        }
        write(region)
    }

    /// Moves the runs written since the last call to the end of `segments` (a run continuing the
    /// last segment's chunk extends it); returns their byte count.
    package mutating func publish(into segments: inout Deque<Segment>) -> Int {
        var total = 0
        for segment in retired { total += Self.append(segment, to: &segments) }
        retired.removeAll(keepingCapacity: true)
        if let chunk, written > published {
            total += Self.append(Segment(chunk: chunk, start: published, end: written), to: &segments)
            published = written
        }
        return total
    }

    /// Stops writing into the current chunk (the reader has caught up): the inbox lets it go once
    /// its bytes are read, and the next write takes a new one of the size reached so far.
    package mutating func releaseChunk() {
        retireChunk()
    }

    /// Drops what was written since the last publication (for an inbox that has ended: what
    /// still arrives is not kept; for a stream reset before its reader got them); returns how
    /// many bytes.
    @discardableResult
    package mutating func discardUnpublished() -> Int {
        var dropped = written - published
        for segment in retired { dropped += segment.count }
        retired.removeAll()
        published = written
        return dropped
    }

    private static func append(_ segment: Segment, to segments: inout Deque<Segment>) -> Int {
        if var last = segments.last, last.chunk === segment.chunk, last.end == segment.start {
            last.end = segment.end
            segments[segments.index(before: segments.endIndex)] = last
        } else {
            segments.append(segment)
        }
        return segment.count
    }

    /// Stops writing into the current chunk; its unpublished run waits for `publish`.
    private mutating func retireChunk() {
        if let chunk, written > published { retired.append(Segment(chunk: chunk, start: published, end: written)) }
        chunk = nil
        written = 0
        published = 0
    }
}
