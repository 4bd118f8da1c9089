import BraidCore
import CBraid
import Logging

/// Streams: opening, sending (round-robin schedule), reading, resets, STOP_SENDING, flow-control
/// credit, retirement, and reopening 0-RTT streams the server refused.
extension QUICConnection {
    /// Opens a stream; throws `streamLimitReached` when the peer's limit is exhausted (wait for
    /// `.streamsAvailable`). Before the handshake this works only when resuming with 0-RTT.
    /// The bytes the peer sends on it go to `sink` when given, else to the engine's buffer.
    package func openStream(bidirectional: Bool, sink: (any QUICStreamSink)? = nil) throws -> Int64 {
        try ensureOpen()
        var id: Int64 = -1
        let rc = bidirectional ? ngtcp2_conn_open_bidi_stream(conn, &id, nil) : ngtcp2_conn_open_uni_stream(conn, &id, nil)
        switch rc {
        case 0:
            let stream = StreamState(id: id)
            stream.sink = sink
            streams[id] = stream
            return id
        case NGTCP2_ERR_STREAM_ID_BLOCKED:
            throw QUICError.streamLimitReached
        default:
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_open_stream")
        }
    }

    /// Streams the peer still lets us open right now.
    package func streamsLeft(bidirectional: Bool) -> UInt64 {
        guard !isClosed else { return 0 }
        return bidirectional ? ngtcp2_conn_get_streams_bidi_left(conn) : ngtcp2_conn_get_streams_uni_left(conn)
    }

    private func stream(_ id: Int64) throws -> StreamState {
        guard let stream = streams[id] else { throw QUICError.invalidStream(streamID: id, reason: "no such stream (closed or never opened)") }
        return stream
    }

    /// Whether `streamID` was opened by us.
    package func isLocallyInitiated(streamID: Int64) -> Bool {
        (streamID & 1 == 0) == (role == .client)
    }

    /// Whether we can send on `streamID` (bidirectional, or unidirectional opened by us).
    func canSendOn(streamID: Int64) -> Bool {
        streamID & 2 == 0 || isLocallyInitiated(streamID: streamID)
    }

    /// Queues bytes (and optionally FIN) on a stream. The bytes are copied and kept until the peer
    /// acknowledges them. Check `canSend(streamID:)` (or `sendRoom(streamID:)`) first to respect
    /// the stream's and the connection's send-buffer bounds.
    package func send<Bytes: Collection>(streamID: Int64, bytes: Bytes, fin: Bool = false) throws where Bytes.Element == UInt8 {
        let copy = StreamBytes(copying: bytes)
        try send(streamID: streamID, bytes: copy, range: 0..<copy.count, fin: fin)
    }

    /// Queues `range` of `bytes` (and optionally FIN) without copying; they are kept until the
    /// peer acknowledges them.
    package func send(streamID: Int64, bytes: StreamBytes, range: Range<Int>, fin: Bool = false) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        guard canSendOn(streamID: streamID) else {
            throw QUICError.invalidStream(streamID: streamID, reason: "receive-only unidirectional stream")
        }
        if stream.stoppedByPeer { throw QUICError.streamStopped(streamID: streamID, code: stream.stopSendingCode) }
        guard !stream.send.finQueued, !stream.locallyReset else {
            throw QUICError.invalidStream(streamID: streamID, reason: "already finished or reset for sending")
        }
        stream.send.append(bytes, range: range)
        if !range.isEmpty { sendBudget.added(range.count, by: stream) }
        if fin { stream.send.finQueued = true }
        schedule(stream)
    }

    func schedule(_ stream: StreamState) {
        guard !stream.scheduled, !stream.blocked, stream.send.hasUnsent else { return }
        stream.scheduled = true
        sendSchedule.append(stream)
    }

    /// Below the send-buffer bounds (`streamSendBufferLimit` for the stream,
    /// `connectionSendBufferLimit` for all streams together): more bytes may be queued.
    /// When this is false, wait for `.streamWritable(streamID)`.
    package func canSend(streamID: Int64) -> Bool { sendRoom(streamID: streamID) > 0 }

    /// How many bytes may be queued on the stream now: 0 at either bound (then wait for
    /// `.streamWritable(streamID)`), else the room left under the connection's bound. The
    /// stream's own bound is checked before each piece, so a stream may pass it by its last
    /// piece; the connection's is exact for callers that queue at most this much.
    package func sendRoom(streamID: Int64) -> Int {
        guard let stream = streams[streamID] else { return 0 }
        if stream.send.unacknowledged >= transport.streamSendBufferLimit {
            stream.wantsWritable = true
            return 0
        }
        let room = sendBudget.room
        if room == 0 { sendBudget.refused(stream) }
        return room
    }

    /// Has `.streamWritable(streamID)` raised at the next round of room under the connection's
    /// budget (once acknowledgements free a quarter of it), for an owner whose own senders
    /// wait for that room outside the engine. False if the engine no longer has the stream.
    package func wakeOnSendRoom(streamID: Int64) -> Bool {
        guard let stream = streams[streamID], !isClosed else { return false }
        sendBudget.refused(stream)
        return true
    }

    /// Stream bytes queued on all streams and not yet acknowledged (at most
    /// `connectionSendBufferLimit` when senders keep to `sendRoom`).
    package var unacknowledgedBytes: Int { sendBudget.held }

    /// Applies `change` to the stream's send buffer (acknowledgements, discards) and gives the
    /// bytes it released back to the connection's budget; once a round of room is due, every
    /// stream waiting for it hears `.streamWritable`.
    func releaseSendBytes(of stream: StreamState, _ change: (inout StreamSendBuffer) -> Void) {
        let before = stream.send.unacknowledged
        change(&stream.send)
        let released = before - stream.send.unacknowledged
        guard released > 0 else { return }
        drainedStreamBytes &+= UInt64(released)
        sendBudget.released(released)
        guard sendBudget.roundDue else { return }
        for waiter in sendBudget.takeRound() where streams[waiter.id] === waiter {
            emit(.streamWritable(streamID: waiter.id))
        }
    }

    /// Bytes queued on the stream and not yet acknowledged.
    package func unacknowledgedBytes(streamID: Int64) -> Int {
        streams[streamID]?.send.unacknowledged ?? 0
    }

    /// What `read` returns.
    package struct StreamRead: Sendable, Equatable {
        package var bytes: [UInt8]
        /// The peer finished the stream and these are its last bytes.
        package var fin: Bool
        /// Some of the bytes arrived in 0-RTT (replayable) packets.
        package var early: Bool
    }

    /// Has the stream's received bytes go to `sink` from now on; the bytes the engine holds
    /// already (those that came before its owner existed, such as a server's first request
    /// bytes in the packets that completed the handshake) go to it now, in order. Does nothing
    /// for a stream the engine no longer has.
    package func installSink(_ sink: any QUICStreamSink, streamID: Int64) {
        guard let stream = streams[streamID] else { return }
        let held = stream.receive.buffered
        if held > 0 {
            _ = stream.receive.read(max: held) { sink.receive($0) }
            drainedStreamBytes &+= UInt64(held)
        }
        stream.sink = sink
        stream.sunkSinceRead += held
    }

    /// Drops what the stream received and its owner has not read (the peer reset it, or we
    /// stopped it); returns how many bytes, whose credit the caller returns.
    func discardUnread(_ stream: StreamState) -> Int {
        var dropped = stream.receive.discard()
        if let sink = stream.sink { dropped += sink.discardUnread() }
        stream.sunkSinceRead = 0
        return dropped
    }

    /// Reads up to `maxBytes` in order and returns that much flow-control credit to the peer.
    /// Throws `streamReset` once buffered bytes are gone if the peer reset the stream.
    ///
    /// For a stream with a sink the bytes went to the sink as they arrived: a read takes none
    /// (call it with `maxBytes: 0`), but still tells the owner that it has taken what the sink
    /// received (so the stream is signalled readable again), and reports the FIN once it
    /// follows those bytes, or the reset.
    package func read(streamID: Int64, maxBytes: Int = .max) throws -> StreamRead {
        var bytes: [UInt8] = []
        let (fin, early) = try read(streamID: streamID, maxBytes: maxBytes) { bytes.append(contentsOf: $0) }
        return StreamRead(bytes: bytes, fin: fin, early: early)
    }

    /// Like `read(streamID:maxBytes:)`, but hands the bytes to `body` in place (valid only
    /// during the call), one contiguous region at a time, instead of copying them into an array.
    ///
    /// With `returnsCredit: false` the bytes leave the engine but their flow-control credit
    /// does not go back to the peer: an owner that keeps read bytes for a slower application
    /// returns it with `returnCredit(streamID:bytes:)` as the application consumes them, so
    /// the peer can never have more than the window unread in both places together.
    package func read(
        streamID: Int64, maxBytes: Int = .max, returnsCredit: Bool = true, into body: (UnsafeRawBufferPointer) -> Void
    ) throws -> (fin: Bool, early: Bool) {
        let stream = try stream(streamID)
        stream.readableSignalled = false
        stream.promptReadSignalled = false
        stream.sunkSinceRead = 0
        let before = stream.receive.buffered
        let early = stream.receive.read(max: maxBytes, body)
        let count = before - stream.receive.buffered
        drainedStreamBytes &+= UInt64(count)
        if count > 0 && returnsCredit { returnCredit(stream: stream, bytes: count) }
        if count == 0, let code = stream.receive.resetCode {
            // The reset is the stream's last word for the reader.
            stream.receive.finDelivered = true
            retireIfDone(stream)
            throw QUICError.streamReset(streamID: streamID, code: code)
        }
        var fin = false
        if stream.receive.isEmpty && stream.receive.finReceived && !stream.receive.finDelivered {
            stream.receive.finDelivered = true
            fin = true
        }
        if count == 0 && !fin && !stream.receive.finDelivered && isClosed {
            throw QUICError.connectionClosed(closeReason ?? .invalidState("closed"))
        }
        retireIfDone(stream)
        return (fin, early)
    }

    /// Bytes received on the stream that its owner has not read yet: in the engine's buffer,
    /// or, with a sink, taken by the sink since the owner's last read.
    package func readableBytes(streamID: Int64) -> Int { streams[streamID]?.unread ?? 0 }

    /// Returns flow-control credit for `bytes` read earlier with `returnsCredit: false` and
    /// now consumed: to the stream while it lives, and always to the connection (whose window
    /// every stream shares, so credit withheld there would shrink it for good).
    package func returnCredit(streamID: Int64, bytes: Int) {
        returnReceiveCredit(streams[streamID], bytes: bytes)
    }

    private func returnCredit(stream: StreamState, bytes: Int) {
        returnReceiveCredit(stream, bytes: bytes)
    }

    /// Abruptly ends our sending side (RESET_STREAM); the peer's reader gets `code`.
    package func resetStream(streamID: Int64, applicationErrorCode code: UInt64) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        stream.locallyReset = true
        releaseSendBytes(of: stream) { $0.discard() }
        let rc = ngtcp2_conn_shutdown_stream_write(conn, streamID, code)
        if rc != 0 && rc != NGTCP2_ERR_STREAM_NOT_FOUND {
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_shutdown_stream_write")
        }
        retireIfDone(stream)
    }

    /// Asks the peer to stop sending (STOP_SENDING with `code`) and drops what is buffered.
    package func stopSending(streamID: Int64, applicationErrorCode code: UInt64) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        // ngtcp2 hands nothing more over (and grants the connection the rest itself).
        noteReceiveEndedEarly(stream, finalSize: nil)
        let dropped = discardUnread(stream)
        if dropped > 0 { returnCredit(stream: stream, bytes: dropped) }
        stream.receive.finDelivered = true
        let rc = ngtcp2_conn_shutdown_stream_read(conn, streamID, code)
        if rc != 0 && rc != NGTCP2_ERR_STREAM_NOT_FOUND {
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_shutdown_stream_read")
        }
        retireIfDone(stream)
    }

    /// Forgets a stream once ngtcp2 is done with it and the application has read everything.
    func retireIfDone(_ stream: StreamState) {
        let isUnidirectional = stream.id & 2 != 0
        let hasReceiveSide = !isUnidirectional || !isLocallyInitiated(streamID: stream.id)
        let readDone = !hasReceiveSide || (stream.receive.finDelivered && stream.receive.isEmpty)
        // ngtcp2 0.12.1 never closes peer-opened unidirectional streams (fixed upstream in 0.14),
        // so for those the delivered FIN or reset is the end.
        let engineDone = stream.closedByEngine || (isUnidirectional && hasReceiveSide && readDone)
        guard engineDone, readDone else { return }
        if !stream.closedByEngine { noteRetainedByEngine(stream) }
        // Bytes ngtcp2 will never have acknowledged (it ended the stream) leave the budget.
        releaseSendBytes(of: stream) { $0.discard() }
        stream.scheduled = false
        streams[stream.id] = nil
        returnStreamCredit(stream)
        emit(.streamClosed(streamID: stream.id))
        if isUnidirectional && hasReceiveSide { closeIfUnidirectionalStreamsSpent() }
    }

    /// A peer-opened stream is fully consumed: allow the peer one more stream of that kind
    /// (once its owner releases it, if the owner holds its credit).
    func returnStreamCredit(_ stream: StreamState) {
        guard !isLocallyInitiated(streamID: stream.id), !stream.creditReturned, !isClosed else { return }
        stream.creditReturned = true
        if stream.creditHeld {
            heldStreamCredit.insert(stream.id)
            return
        }
        extendStreamLimit(ofKindOf: stream.id)
    }

    private func extendStreamLimit(ofKindOf streamID: Int64) {
        guard streamID & 2 != 0 else {
            ngtcp2_conn_extend_max_streams_bidi(conn, 1)
            return
        }
        // ngtcp2 0.12.1 never frees a peer's unidirectional stream (its object and table
        // entries, and its reassembly buffer if its bytes came out of order), so the peer may
        // open only so many over the connection's life.
        peerUnidirectionalStreamsEnded &+= 1
        if peerUnidirectionalStreamsGranted < transport.peerUnidirectionalStreamLimit {
            peerUnidirectionalStreamsExtended &+= 1
            ngtcp2_conn_extend_max_streams_uni(conn, 1)
        }
    }

    /// Every unidirectional stream the peer may open over the connection's life (the limit
    /// our transport parameter started, raised as streams were consumed).
    var peerUnidirectionalStreamsGranted: UInt64 {
        transport.initialMaxUnidirectionalStreams &+ peerUnidirectionalStreamsExtended
    }

    /// Why a connection closed once its peer consumed every unidirectional stream it may open.
    package static func unidirectionalStreamLimitReason(_ limit: UInt64) -> String {
        "unidirectional stream limit reached: the peer opened the \(limit) unidirectional streams one connection may open; open a new connection"
    }

    /// The peer consumed the last unidirectional stream it may open: it can never open
    /// another, so the connection ends with NO_ERROR and a reason that says why (a peer
    /// waiting for stream credit would otherwise wait for good). Its other streams end with it.
    func closeIfUnidirectionalStreamsSpent() {
        let granted = peerUnidirectionalStreamsGranted
        guard !isClosed, granted >= transport.peerUnidirectionalStreamLimit, peerUnidirectionalStreamsEnded >= granted else { return }
        // A stream ngtcp2 closed is retired inside its callback: close after `read_pkt`.
        unidirectionalStreamsSpentInRead = readingPacket
        guard !readingPacket else { return }
        logger.debug("closing: the peer used all \(granted) unidirectional streams it may open")
        close(transportErrorCode: UInt64(NGTCP2_NO_ERROR), reason: Self.unidirectionalStreamLimitReason(granted), now: currentTime)
    }

    /// Calls `body` with each bidirectional stream the peer opened that ngtcp2 has not closed
    /// and we have not reset, and when it opened: a protocol above walks them for its deadlines
    /// (an HTTP/3 server's for request header sections) instead of timing each stream itself.
    /// `body` must not call the engine.
    package func forEachOpenPeerBidirectionalStream(_ body: (_ streamID: Int64, _ openedAt: QUICInstant) -> Void) {
        for stream in streams.values
        where stream.id & 2 == 0 && !isLocallyInitiated(streamID: stream.id) && !stream.closedByEngine && !stream.locallyReset {
            body(stream.id, stream.openedAt)
        }
    }

    /// Keeps a peer-opened stream counting against the peer's stream limit after it closes,
    /// until `releaseStreamCredit(streamID:)`: work the stream started (a request's handler)
    /// then counts as the stream did, so a peer that resets streams at once cannot start more
    /// of it than its limit allows. Nothing happens for a stream that is gone or our own.
    package func holdStreamCredit(streamID: Int64) {
        guard !isLocallyInitiated(streamID: streamID), let stream = streams[streamID], !stream.creditReturned else { return }
        stream.creditHeld = true
    }

    /// Ends `holdStreamCredit(streamID:)`: the peer may open another stream once this one has
    /// closed (at once if it has).
    package func releaseStreamCredit(streamID: Int64) {
        if let stream = streams[streamID] {
            stream.creditHeld = false
        } else if heldStreamCredit.remove(streamID) != nil, !isClosed {
            extendStreamLimit(ofKindOf: streamID)
            if streamID & 2 != 0 { closeIfUnidirectionalStreamsSpent() }
        }
    }

    /// Peer-opened streams that have closed but still count against the peer's limit
    /// (`holdStreamCredit(streamID:)`).
    package var heldStreamCreditCount: Int { heldStreamCredit.count }

    /// Reopens 0-RTT streams under the same IDs and queues their bytes again from offset 0.
    func reopenRejectedStreams() {
        guard !pendingReopen.isEmpty, !isClosed else { return }
        let rejected = pendingReopen
        pendingReopen = []
        for old in rejected {
            var id: Int64 = -1
            let rc = old.id & 2 == 0 ? ngtcp2_conn_open_bidi_stream(conn, &id, nil) : ngtcp2_conn_open_uni_stream(conn, &id, nil)
            guard rc == 0, id == old.id else {
                logger.warning("0-RTT stream \(old.id) could not be reopened after rejection (rc \(rc), id \(id))")
                old.receive.resetCode = 0
                old.closedByEngine = true
                streams[old.id] = old
                signalReadable(old)
                continue
            }
            old.send.rewind()
            old.scheduled = false
            old.blocked = false
            streams[id] = old
            schedule(old)
        }
    }

    /// The peer sent STOP_SENDING: nothing more will be sent or retransmitted on this stream.
    func peerStoppedSending(_ stream: StreamState, code: UInt64?) {
        guard !stream.stoppedByPeer else {
            if let code, stream.stopSendingCode == nil { stream.stopSendingCode = code }
            return
        }
        stream.stoppedByPeer = true
        stream.stopSendingCode = code
        releaseSendBytes(of: stream) { $0.discard() }
        stream.scheduled = false
        emit(.streamStopSending(streamID: stream.id, code: code))
    }

    /// Buffered bytes worth taking at once: a stream that holds this many unread is signalled
    /// readable again (once until the next read), so an owner that leaves smaller amounts for
    /// later (to take a stream's bytes in one piece) still hands a bulk reader its bytes as
    /// they come.
    package static let promptReadThreshold = 64 * 1024

    func signalReadable(_ stream: StreamState) {
        if !stream.readableSignalled {
            stream.readableSignalled = true
            emit(.streamReadable(streamID: stream.id))
        } else if !stream.promptReadSignalled, stream.unread >= Self.promptReadThreshold {
            stream.promptReadSignalled = true
            emit(.streamReadable(streamID: stream.id))
        }
    }

    /// ngtcp2 discarded every stream opened in 0-RTT and reset stream-ID allocation. Reopen them
    /// in the same order (so they get the same IDs) and resend everything in 1-RTT.
    func earlyDataWasRejected() {
        emit(.earlyDataRejected)
        let local = streams.values.filter { isLocallyInitiated(streamID: $0.id) }.sorted { $0.id < $1.id }
        sendSchedule.removeAll()
        sendTurnBytes = 0
        for old in local {
            streams[old.id] = nil
            pendingReopen.append(old)
        }
    }
}
