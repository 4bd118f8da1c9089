import DequeModule

/// The send half of a stream: queued bytes from the first unacknowledged one on.
struct StreamSendBuffer {
    /// One queued piece: a range of some `StreamBytes`.
    struct Piece {
        let bytes: StreamBytes
        let start: Int
        let count: Int
    }
    /// Pieces still unacknowledged, the first starting at stream offset `firstChunkOffset`.
    private(set) var chunks = Deque<Piece>()
    /// Stream offset at which `chunks.first` begins.
    private var firstChunkOffset: UInt64 = 0
    /// The chunk holding `sentOffset` (`chunks.count` when everything queued was sent) and the
    /// stream offset it begins at: each packet starts there instead of walking the chunks
    /// that are only waiting for acknowledgement.
    private var unsentChunk = 0
    private var unsentChunkOffset: UInt64 = 0
    /// Everything below this offset is acknowledged.
    private(set) var ackedOffset: UInt64 = 0
    /// Next offset to hand to ngtcp2.
    private(set) var sentOffset: UInt64 = 0
    /// Offset just past the last queued byte.
    private(set) var queuedOffset: UInt64 = 0
    /// The application finished the stream (FIN queued).
    var finQueued = false
    /// FIN went out in a packet.
    var finSent = false

    /// Bytes queued but not yet acknowledged: what backpressure bounds.
    var unacknowledged: Int { Int(queuedOffset - ackedOffset) }
    var hasUnsent: Bool { sentOffset < queuedOffset || (finQueued && !finSent) }
    var unsentCount: Int { Int(queuedOffset - sentOffset) }

    mutating func append(_ bytes: StreamBytes, range: Range<Int>) {
        guard !range.isEmpty else { return }
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count)
        chunks.append(Piece(bytes: bytes, start: range.lowerBound, count: range.count))
        queuedOffset += UInt64(range.count)
    }

    /// Describes up to `limit` unsent regions starting at `sentOffset` as (pointer, length).
    func unsentRegions(limit: Int, into body: (UnsafeRawPointer, Int) -> Void) {
        var offset = unsentChunkOffset
        var index = unsentChunk
        var emitted = 0
        while index < chunks.count && emitted < limit {
            let chunk = chunks[index]
            let skip = Int(sentOffset > offset ? sentOffset - offset : 0)
            if skip < chunk.count {
                body(chunk.bytes.base.baseAddress! + chunk.start + skip, chunk.count - skip)
                emitted += 1
            }
            offset += UInt64(chunk.count)
            index += 1
        }
    }

    mutating func markSent(_ count: Int) {
        sentOffset += UInt64(count)
        precondition(sentOffset <= queuedOffset)
        while unsentChunk < chunks.count, unsentChunkOffset + UInt64(chunks[unsentChunk].count) <= sentOffset {
            unsentChunkOffset += UInt64(chunks[unsentChunk].count)
            unsentChunk += 1
        }
    }

    /// ngtcp2 acknowledges a contiguous prefix: release every chunk entirely below it.
    mutating func acknowledge(upTo offset: UInt64) {
        ackedOffset = max(ackedOffset, min(offset, queuedOffset))
        while let first = chunks.first, firstChunkOffset + UInt64(first.count) <= ackedOffset {
            firstChunkOffset += UInt64(first.count)
            chunks.removeFirst()
            if unsentChunk > 0 {
                unsentChunk -= 1
            } else {
                // Acknowledged beyond what we counted as sent (cannot happen: ngtcp2 only
                // acknowledges what it was given); keep the bookkeeping consistent anyway.
                unsentChunkOffset = firstChunkOffset
            }
        }
    }

    /// Sends everything again from offset 0 (0-RTT was rejected, so nothing was acknowledged).
    mutating func rewind() {
        precondition(ackedOffset == 0 && firstChunkOffset == 0, "rewind after acknowledgements")
        sentOffset = 0
        unsentChunk = 0
        unsentChunkOffset = 0
        finSent = false
    }

    /// Drops everything (stream reset or stopped): nothing more will be sent or retransmitted.
    mutating func discard() {
        chunks.removeAll()
        firstChunkOffset = queuedOffset
        ackedOffset = queuedOffset
        sentOffset = queuedOffset
        unsentChunk = 0
        unsentChunkOffset = queuedOffset
        finSent = true
    }
}

/// The receive half of a stream: in-order bytes ngtcp2 delivered that the application has not
/// read yet (for a stream without a `QUICStreamSink`), and how the stream ended. Bounded by the
/// flow-control window we advertise, because credit is returned only as the application reads.
///
/// One contiguous buffer (not an array per packet): a packet's bytes are appended with one
/// copy and no allocation once the buffer has grown to the stream's working size.
struct StreamReceiveBuffer {
    private var storage: [UInt8] = []
    /// Bytes before this index were read already.
    private var head = 0
    /// Runs of buffered bytes that did or did not arrive in 0-RTT packets, oldest first, as
    /// (end index in `storage`, early). Almost always a single run.
    private var runs = Deque<(end: Int, early: Bool)>()
    var buffered: Int { storage.count - head }
    /// All bytes up to the FIN have arrived.
    var finReceived = false
    /// The application has read the FIN.
    var finDelivered = false
    /// The peer reset the stream with this code (RESET_STREAM).
    var resetCode: UInt64?

    mutating func append(_ bytes: UnsafeRawBufferPointer, early: Bool) {
        guard bytes.count > 0 else { return }
        if head > 0 && (head == storage.count || head >= storage.count / 2) {
            // Reclaim the read prefix before growing: a move of at most half the buffer.
            storage.removeSubrange(0..<head)
            runs = Deque(runs.map { ($0.end - head, $0.early) })
            head = 0
        }
        storage.append(contentsOf: bytes)
        if let last = runs.last, last.early == early {
            runs[runs.count - 1].end = storage.count
        } else {
            runs.append((storage.count, early))
        }
    }

    var isEmpty: Bool { buffered == 0 }

    /// Removes up to `max` bytes, handing them to `body` (valid only during the call); returns
    /// whether any of them arrived in 0-RTT.
    mutating func read(max: Int, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        let count = Swift.min(max, buffered)
        guard count > 0 else { return false }
        let end = head + count
        storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[head..<end])) }
        // The runs the read bytes fall in, then drop those read completely.
        var early = false
        for run in runs {
            early = early || run.early
            if run.end >= end { break }
        }
        while let first = runs.first, first.end <= end { runs.removeFirst() }
        head = end
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
            runs.removeAll()
        }
        return early
    }

    mutating func discard() -> Int {
        let dropped = buffered
        storage.removeAll()
        runs.removeAll()
        head = 0
        return dropped
    }
}

/// Everything the engine tracks about one stream. Its state skips the run-time exclusivity
/// check, as the connection's per-packet state does (one thread; no access held across a call
/// that could reach it again).
final class StreamState {
    let id: Int64
    @exclusivity(unchecked) var send = StreamSendBuffer()
    /// Received bytes of a stream without a sink, and the receive side's end for every stream.
    @exclusivity(unchecked) var receive = StreamReceiveBuffer()
    /// Takes received bytes in place of `receive`'s buffer, which then stays empty.
    @exclusivity(unchecked) var sink: (any QUICStreamSink)?
    /// Bytes handed to `sink` since the owner's last read.
    @exclusivity(unchecked) var sunkSinceRead = 0
    /// Bytes received that the owner has not read yet, wherever they wait.
    var unread: Int { receive.buffered + sunkSinceRead }
    /// In the send schedule (has unsent bytes and is not blocked).
    @exclusivity(unchecked) var scheduled = false
    /// Blocked by the peer's stream flow control until `extend_max_stream_data`.
    @exclusivity(unchecked) var blocked = false
    /// The peer sent STOP_SENDING; further sends fail.
    @exclusivity(unchecked) var stoppedByPeer = false
    /// Its application error code, once ngtcp2 reported it.
    @exclusivity(unchecked) var stopSendingCode: UInt64?
    /// We reset our sending side.
    @exclusivity(unchecked) var locallyReset = false
    /// ngtcp2 closed the stream (both directions done); our state lives on until read.
    @exclusivity(unchecked) var closedByEngine = false
    /// A `streamReadable` event is pending since the last read (coalesces per-packet events).
    @exclusivity(unchecked) var readableSignalled = false
    /// A second one went once `promptReadThreshold` bytes were buffered, since the last read.
    @exclusivity(unchecked) var promptReadSignalled = false
    /// A `streamWritable` event is wanted once the send buffer drains below the limit.
    @exclusivity(unchecked) var wantsWritable = false
    /// Stream credit for this peer-opened stream was returned to the peer.
    @exclusivity(unchecked) var creditReturned = false
    /// The owner keeps this stream's credit past its close (`holdStreamCredit(streamID:)`).
    @exclusivity(unchecked) var creditHeld = false
    /// Waits for room under the connection's send budget (`SendBudget+StreamRounds`).
    @exclusivity(unchecked) var waitsForSendBudget = false
    /// Its place in the line for room under the connection's send budget, kept until it gets room.
    @exclusivity(unchecked) var sendBudgetTicket: UInt64?
    /// The receive window (`ReceiveWindowLedger`): the offset the peer may send up to as
    /// granted so far (nil: still the initial window), the bytes ngtcp2 handed over, the final
    /// size once known, and whether the receive side ended early (the peer's RESET_STREAM or
    /// our STOP_SENDING: ngtcp2 then gives the connection its credit back itself).
    @exclusivity(unchecked) var receiveLimit: UInt64?
    @exclusivity(unchecked) var receiveDelivered: UInt64 = 0
    @exclusivity(unchecked) var receiveFinalSize: UInt64?
    @exclusivity(unchecked) var receiveEndedEarly = false
    /// Tuned windows only: the stream's window now (nil: the initial one), credit read back
    /// and not yet granted, and when it was last granted.
    @exclusivity(unchecked) var receiveWindow: UInt64?
    @exclusivity(unchecked) var receivePending: UInt64 = 0
    @exclusivity(unchecked) var lastReceiveGrant: UInt64?
    /// Peer-opened streams: when the peer opened it (for deadlines of the protocol above).
    @exclusivity(unchecked) var openedAt = QUICInstant(nanoseconds: 0)

    init(id: Int64) { self.id = id }
}
