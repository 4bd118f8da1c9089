import CBraid

/// Plaintext in, ciphertext out: sending, 0-RTT data, close_notify and the pending output.
extension TLSConnection {
    /// Encrypts plaintext into records of up to 16 KiB and queues them. Returns how many bytes were
    /// taken: fewer than offered when `pendingCiphertextLimit` bytes are pending, so the caller
    /// keeps the rest and waits until the socket drains the output (backpressure).
    public func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) -> Int {
        try checkSendable()
        try sealCoalesced()
        guard let base = plaintext.baseAddress else { return 0 }
        var taken = 0
        while taken < plaintext.count && output.count < Self.pendingCiphertextLimit {
            taken += try seal(base + taken, count: min(plaintext.count - taken, Self.maxRecordPayload))
        }
        return taken
    }

    /// Like `send`, but plaintext that does not fill a record waits (copied, up to one record's
    /// payload) to share a record with what the next calls bring; `sealCoalesced()` seals it.
    /// Each record costs a seal, a header and GnuTLS's per-record work on both ends, so a burst
    /// of small sends (a message framer's messages) is much cheaper sealed 16 KiB at a time
    /// than one record each. With nothing waiting, `directSealMinimum` bytes or more go straight
    /// from `plaintext` into records of their own (up to a full record each), without the copy
    /// into the waiting record: a block of queued small sends is one such piece. Returns how
    /// many bytes were taken: fewer than offered when `pendingCiphertextLimit` bytes are pending
    /// and the waiting record is full. Call `sealCoalesced()` before waiting for anything: what
    /// waits here goes nowhere until then (`send` and `close` seal it first too).
    public func sendCoalescing(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) -> Int {
        try checkSendable()
        guard let base = plaintext.baseAddress else { return 0 }
        var taken = 0
        while taken < plaintext.count {
            let left = plaintext.count - taken
            if coalesced.count == 0 && left >= Self.directSealMinimum {
                guard output.count < Self.pendingCiphertextLimit else { break }
                taken += try seal(base + taken, count: min(left, Self.maxRecordPayload))
            } else if coalesced.count < Self.maxRecordPayload {
                let count = min(Self.maxRecordPayload - coalesced.count, left)
                coalesced.append(base + taken, count: count)
                taken += count
            } else {
                guard output.count < Self.pendingCiphertextLimit else { break }
                try sealCoalesced()
            }
        }
        return taken
    }

    /// Seals the plaintext `sendCoalescing` left waiting into one record, whatever is pending
    /// (at most one record past `pendingCiphertextLimit`).
    public func sealCoalesced() throws(TLSError) {
        guard coalesced.count > 0, let base = coalesced.readable.baseAddress else { return }
        let count = coalesced.count
        var sealed = 0
        while sealed < count { sealed += try seal(base + sealed, count: count - sealed) }
        coalesced.consume(sealed)
    }

    /// The fewest bytes `sendCoalescing` seals straight from the caller's memory when nothing
    /// waits: half a record, so such a record's own cost (its header, tag and GnuTLS's work per
    /// record) stays within twice a full record's, while the copy it saves is a byte per byte.
    public static let directSealMinimum = maxRecordPayload / 2

    /// Plaintext `sendCoalescing` holds, not yet sealed.
    public var coalescedPlaintextCount: Int { coalesced.count }

    private func checkSendable() throws(TLSError) {
        switch state {
        case .failed(let error): throw error
        case .notStarted, .handshaking, .awaitingVerdict:
            throw .invalidState("send before the handshake completed (use sendEarlyData for 0-RTT)")
        case .established: break
        }
        guard !closeSent else { throw .invalidState("send after close()") }
    }

    /// One record of `count` bytes (at most a record's payload); returns how many GnuTLS took.
    private func seal(_ bytes: UnsafeRawPointer, count: Int) throws(TLSError) -> Int {
        let n = gnutls_record_send(session, bytes, count)
        if n < 0 { throw fail(Int32(n), in: "gnutls_record_send") }
        return n
    }

    /// Client, resuming with a ticket that allows 0-RTT, before the first `process`: queues
    /// `plaintext` to travel with the ClientHello. Returns how many bytes fit under the ticket's
    /// `maxEarlyDataSize` (0 when early data is impossible). If the server rejects it,
    /// `process` reports `.earlyDataRejected`; resend then.
    public func sendEarlyData(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) -> Int {
        guard role == .client else { throw .invalidState("only a client sends early data") }
        guard case .notStarted = state else {
            throw .invalidState("early data must be queued before the first process() call")
        }
        guard let ticket = resumption, let base = plaintext.baseAddress, clientContext?.configuration.maximumVersion == .v1_3
        else { return 0 }
        let room = max(0, min(ticket.maxEarlyDataSize, Int(gnutls_record_get_max_early_data_size(session))) - earlyData.count)
        let count = min(room, plaintext.count)
        guard count > 0 else { return 0 }
        let rc = gnutls_record_send_early_data(session, base, count)
        if rc < 0 { throw .internalError(function: "gnutls_record_send_early_data", code: Int32(rc)) }
        // GnuTLS 3.7 buffers all `count` bytes and returns 0, not the count its manual promises.
        earlyData.append(contentsOf: UnsafeRawBufferPointer(rebasing: plaintext[0..<count]))
        return count
    }

    /// Client, after `.earlyDataRejected`: sends the rejected 0-RTT bytes again as ordinary data,
    /// ahead of anything sent after. Returns how many were taken (see `send`); call again for the
    /// rest after the output drains.
    public func resendRejectedEarlyData() throws(TLSError) -> Int {
        guard !earlyDataAccepted, !earlyData.isEmpty else { return 0 }
        let pending = earlyData
        let taken = try pending.withUnsafeBytes { bytes in Result { () throws(TLSError) in try send(bytes) } }.get()
        earlyData.removeFirst(taken)
        return taken
    }

    /// Ciphertext waiting to be written to the transport.
    public var pendingCiphertextCount: Int { output.count }

    /// Lets the caller write pending ciphertext straight from the engine's buffer (e.g.
    /// `write(fd, bytes.baseAddress, bytes.count)`). `body` returns how many bytes it wrote, which
    /// may be fewer than offered; those are dropped from the output. Returns that count.
    @discardableResult
    public func withPendingCiphertext(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        guard output.count > 0 else { return 0 }
        let written = try body(output.readable)
        output.consume(written)
        return written
    }

    /// Queues close_notify: we send nothing more. The peer may still send until it closes too.
    /// Idempotent; does nothing on a failed connection (its alert is already queued).
    public func close() {
        guard !closeSent else { return }
        if case .failed = state { return }
        // What waits to share a record goes before close_notify; if sealing fails, the
        // connection has failed and its alert is queued instead.
        guard (try? sealCoalesced()) != nil else { return }
        closeSent = true
        _ = gnutls_bye(session, GNUTLS_SHUT_WR)
    }
}
