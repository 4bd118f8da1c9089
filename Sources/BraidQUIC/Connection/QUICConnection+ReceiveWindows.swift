import CBraid

/// Receive windows: the credit Braid grants the peer (`ReceiveWindowLedger`), its tuning on a
/// listener's connections, and the bound on what ngtcp2 may hold of received stream bytes.
extension QUICConnection {
    /// A stream's initial receive window: our transport parameter for its kind (0: a stream
    /// we opened that only sends).
    func initialReceiveLimit(of stream: StreamState) -> UInt64 {
        let initial = receiveWindows.initial
        let local = isLocallyInitiated(streamID: stream.id)
        if stream.id & 2 != 0 { return local ? 0 : initial.unidirectional }
        return local ? initial.bidirectionalLocal : initial.bidirectionalRemote
    }

    /// ngtcp2 handed over `length` bytes of `stream` in order (`fin`: the last of them).
    func noteDelivered(_ stream: StreamState, length: Int, fin: Bool) {
        stream.receiveDelivered &+= UInt64(length)
        receiveWindows.delivered &+= UInt64(length)
        if fin { stream.receiveFinalSize = stream.receiveDelivered }
    }

    /// The stream's receive side ended before its end (the peer's RESET_STREAM with
    /// `finalSize`, or our STOP_SENDING): ngtcp2 hands nothing more over, and gives the
    /// connection the credit of what it did not hand over itself.
    func noteReceiveEndedEarly(_ stream: StreamState, finalSize: UInt64?) {
        stream.receiveEndedEarly = true
        if let finalSize { stream.receiveFinalSize = finalSize }
    }

    /// Grants the peer `bytes` more on the connection, now.
    private func extendConnectionLimit(by bytes: UInt64) {
        guard bytes > 0 else { return }
        receiveWindows.connectionGranted &+= bytes
        ngtcp2_conn_extend_max_offset(conn, bytes)
    }

    /// Grants the peer `bytes` more on `stream`, now.
    private func extendStreamReceiveLimit(_ stream: StreamState, by bytes: UInt64) {
        guard bytes > 0 else { return }
        stream.receiveLimit = (stream.receiveLimit ?? initialReceiveLimit(of: stream)) &+ bytes
        ngtcp2_conn_extend_max_stream_offset(conn, stream.id, bytes)
    }

    /// The application consumed `bytes` received on `stream` (nil: a stream already gone, or
    /// bytes dropped unread): their credit goes back to the stream while ngtcp2 has it, and to
    /// the connection. Tuned windows gather it first (`ReceiveWindowLedger.tunes`).
    func returnReceiveCredit(_ stream: StreamState?, bytes: Int) {
        guard bytes > 0, !isClosed else { return }
        let credit = UInt64(bytes)
        let streamTakesCredit = stream.map { !$0.closedByEngine && !$0.receiveEndedEarly } ?? false
        guard receiveWindows.tunes else {
            if let stream, streamTakesCredit { extendStreamReceiveLimit(stream, by: credit) }
            extendConnectionLimit(by: credit)
            return
        }
        if let stream, streamTakesCredit {
            stream.receivePending &+= credit
            grantStreamCredit(stream)
        }
        receiveWindows.connectionPending &+= credit
        grantConnectionCredit()
    }

    /// Tuned windows: grants a stream's gathered credit once it is half its window (ngtcp2
    /// would not announce less), doubling the window when the last grant was under two round
    /// trips ago (the peer is sending as fast as the window lets it), unless the listener is at
    /// its buffer limit.
    private func grantStreamCredit(_ stream: StreamState) {
        guard !receiveWindows.withheld else { return }
        let window = stream.receiveWindow ?? initialReceiveLimit(of: stream)
        guard window > 0, stream.receivePending * 2 >= window else { return }
        let growth = windowGrowth(window, maximum: receiveWindows.maxStreamWindow, lastGrant: stream.lastReceiveGrant)
        stream.receiveWindow = window + growth
        stream.lastReceiveGrant = currentTime.nanoseconds
        extendStreamReceiveLimit(stream, by: stream.receivePending + growth)
        stream.receivePending = 0
    }

    /// How much a window grows at a grant: doubled (up to `maximum`) when the last grant was
    /// under two round trips ago, else not at all.
    private func windowGrowth(_ window: UInt64, maximum: UInt64, lastGrant: UInt64?) -> UInt64 {
        guard let lastGrant, window < maximum, currentTime.nanoseconds &- lastGrant < 2 * smoothedRTTNanoseconds else { return 0 }
        return min(window, maximum - window)
    }

    /// Tuned windows: as `grantStreamCredit`, for the connection.
    private func grantConnectionCredit() {
        guard !receiveWindows.withheld else { return }
        let window = receiveWindows.connectionWindow
        guard receiveWindows.connectionPending * 2 >= window else { return }
        let growth = windowGrowth(window, maximum: receiveWindows.maxConnectionWindow, lastGrant: receiveWindows.lastConnectionGrant)
        receiveWindows.connectionWindow = window + growth
        receiveWindows.lastConnectionGrant = currentTime.nanoseconds
        extendConnectionLimit(by: receiveWindows.connectionPending + growth)
        receiveWindows.connectionPending = 0
    }

    private var smoothedRTTNanoseconds: UInt64 {
        var stat = ngtcp2_conn_stat()
        braid_ngtcp2_conn_get_conn_stat(conn, &stat)
        return stat.smoothed_rtt
    }

    /// Whether credit the application reads back waits instead of going to the peer, and
    /// windows stop growing (tuned windows only): a listener at its buffer limit holds it so
    /// the bytes its connections may be sent shrink as their applications read, before it
    /// closes any. Returns true when credit was granted on release (the connection has
    /// frames to send).
    @discardableResult
    package func withholdReceiveCredit(_ withhold: Bool) -> Bool {
        guard receiveWindows.tunes, withhold != receiveWindows.withheld else { return false }
        receiveWindows.withheld = withhold
        guard !withhold, !isClosed else { return false }
        let granted = receiveWindows.connectionGranted
        var streamGranted = false
        for stream in streams.values where stream.receivePending > 0 {
            let before = stream.receiveLimit
            grantStreamCredit(stream)
            streamGranted = streamGranted || stream.receiveLimit != before
        }
        grantConnectionCredit()
        return streamGranted || receiveWindows.connectionGranted != granted
    }

    /// The most ngtcp2 may hold of stream bytes it received and has not handed over (its
    /// reassembly buffers; ngtcp2 0.12.1 has no getter for them), from what Braid granted:
    ///
    /// - each stream's pieces between what was handed over and what the peer may send (its
    ///   granted limit, or its final size), and its reassembly buffer's own memory, while
    ///   ngtcp2 keeps the stream;
    /// - for streams whose receive side is still open, at most the connection's granted and
    ///   not handed over credit plus two pieces each (ngtcp2 counts every stream's highest
    ///   offset against the connection's limit; its own grants, for streams that end early,
    ///   equal what those streams took past what was handed over, so they are left out of
    ///   both sides);
    /// - what ngtcp2 keeps of peer-opened unidirectional streams Braid forgot.
    package var engineReceiveBound: Int {
        var open: UInt64 = 0
        var openStreams: UInt64 = 0
        var ended: UInt64 = 0
        var overhead: UInt64 = 0
        for stream in streams.values where !stream.closedByEngine {
            let limit = stream.receiveFinalSize ?? stream.receiveLimit ?? initialReceiveLimit(of: stream)
            guard limit > 0 else { continue }
            overhead &+= ReceiveWindowLedger.reassemblyOverhead
            let pieces = ReceiveWindowLedger.pieces(delivered: stream.receiveDelivered, limit: limit)
            if stream.receiveEndedEarly {
                ended &+= pieces
            } else {
                open &+= pieces
                openStreams &+= 1
            }
        }
        let ledger = receiveWindows
        let available = ledger.connectionGranted &- min(ledger.delivered, ledger.connectionGranted)
        let bound = min(open, available &+ openStreams * 2 * ReceiveWindowLedger.pieceSize) &+ ended &+ overhead
        return Int(clamping: bound &+ ledger.retainedBytes)
    }

    /// Braid forgets a peer-opened unidirectional stream that ngtcp2 0.12.1 keeps (it never
    /// frees them): what ngtcp2 may still hold of it stays counted.
    func noteRetainedByEngine(_ stream: StreamState) {
        let limit = stream.receiveFinalSize ?? stream.receiveLimit ?? initialReceiveLimit(of: stream)
        receiveWindows.retainedBytes &+= ReceiveWindowLedger.pieces(delivered: stream.receiveDelivered, limit: limit)
            &+ ReceiveWindowLedger.reassemblyOverhead &+ ReceiveWindowLedger.retainedStreamOverhead
    }
}
