import CBraid

/// Plaintext in, ciphertext out: sending, 0-RTT data, close_notify and the pending output.
extension TLSConnection {
    /// Encrypts plaintext into records of up to 16 KiB and queues them. Returns how many bytes were
    /// taken: fewer than offered when `pendingCiphertextLimit` bytes are pending, so the caller
    /// keeps the rest and waits until the socket drains the output (backpressure).
    public func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) -> Int {
        switch state {
        case .failed(let error): throw error
        case .notStarted, .handshaking: throw .invalidState("send before the handshake completed (use sendEarlyData for 0-RTT)")
        case .established: break
        }
        guard !closeSent else { throw .invalidState("send after close()") }
        guard let base = plaintext.baseAddress else { return 0 }
        var taken = 0
        while taken < plaintext.count && output.count < Self.pendingCiphertextLimit {
            let n = gnutls_record_send(session, base + taken, min(plaintext.count - taken, Self.maxRecordPayload))
            if n < 0 { throw fail(Int32(n), in: "gnutls_record_send") }
            taken += n
        }
        return taken
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
        closeSent = true
        _ = gnutls_bye(session, GNUTLS_SHUT_WR)
    }
}
