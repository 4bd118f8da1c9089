import BraidCore
import CBraid

/// Ciphertext in: the input buffer, the handshake, record decryption and the end of the stream.
extension TLSConnection {
    /// Lets the caller write received ciphertext straight into the engine's input buffer (e.g.
    /// `read(fd, space.baseAddress, space.count)`). `body` gets the free space, at least
    /// `minimum` bytes, and returns how many bytes it wrote. When less than `minimum` bytes are
    /// free (the input holds `inputCapacity` bytes of unprocessed ciphertext), `body` is not called
    /// and the result is 0: call `process` first. Returns what `body` returned.
    @discardableResult
    public func withInputSpace(minimum: Int = 1, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        let space = input.writableSpace(minimum: minimum)
        guard space.count >= max(minimum, 1) else {
            input.releaseIfEmpty()
            return 0
        }
        var written = 0
        // Also when `body` throws: an input left empty gives its memory back.
        defer { input.commitWrite(written) }
        written = try body(space)
        return written
    }

    /// Copies received ciphertext into the input buffer (tests and callers without a socket).
    /// Returns how many bytes fit; the rest must be offered again after `process`.
    @discardableResult
    public func receiveCiphertext(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        let space = input.writableSpace(minimum: bytes.count)
        let n = min(space.count, bytes.count)
        if n > 0 { space.baseAddress!.copyMemory(from: base, byteCount: n) }
        input.commitWrite(n)
        return n
    }

    /// Bytes received and not yet processed (at most `inputCapacity`).
    public var bufferedCiphertextCount: Int { input.count }

    /// Advances the handshake and decrypts every complete record buffered, handing each record's
    /// plaintext to `deliver` in order, without copying it (the pointer is valid only during the
    /// call). A server hands out accepted 0-RTT data first. Returns what happened besides data.
    ///
    /// Throws a `TLSError` when the connection fails; the alert telling the peer why (if any) is
    /// queued in the pending ciphertext, so flush it before closing. Every later call throws the
    /// same error.
    public func process(deliver: (UnsafeRawBufferPointer) -> Void) throws(TLSError) -> [TLSEvent] {
        var events: [TLSEvent] = []
        switch state {
        case .failed(let error):
            throw error
        case .notStarted:
            state = .handshaking
            fallthrough
        case .handshaking:
            guard try advanceHandshake(deliver: deliver, events: &events), isHandshakeComplete else { return events }
        case .awaitingVerdict:
            // Nothing from an unjudged peer reaches the caller: its records stay buffered.
            return events
        case .established:
            if announcesCompletion {
                announcesCompletion = false
                events.append(.handshakeCompleted)
            }
        }
        try receiveRecords(deliver: deliver, events: &events)
        return events
    }

    /// Runs the handshake as far as the buffered input allows; true once complete.
    private func advanceHandshake(deliver: (UnsafeRawBufferPointer) -> Void, events: inout [TLSEvent]) throws(TLSError) -> Bool {
        while true {
            let consumedBefore = input.totalConsumed
            let rc = handshakeStep()
            if role == .server { deliverEarlyData(deliver) }
            switch rc {
            case 0:
                completeHandshake(events: &events)
                return true
            case GNUTLS_E_AGAIN, GNUTLS_E_INTERRUPTED, GNUTLS_E_WARNING_ALERT_RECEIVED, GNUTLS_E_GOT_APPLICATION_DATA:
                // GnuTLS may stop after each record (0-RTT data, a warning alert) with input left:
                // go on while the last call consumed something.
                if input.totalConsumed == consumedBefore { return false }
            default:
                throw fail(rc, in: "gnutls_handshake")
            }
        }
    }

    /// One `gnutls_handshake` call; a server sharing its anti-replay context across threads holds
    /// that context's lock until the ClientHello is processed (GnuTLS 3.7 updates it unlocked).
    private func handshakeStep() -> Int32 {
        if let antiReplay = serverContext?.antiReplay, !clientHelloProcessed {
            return antiReplay.lock.withLock { _ in gnutls_handshake(session) }
        }
        return gnutls_handshake(session)
    }

    private func completeHandshake(events: inout [TLSEvent]) {
        negotiatedALPN = BraidTLS.negotiatedALPN(session)
        negotiatedVersion = TLSVersion(gnutls_protocol_get_version(session))
        isResumed = gnutls_session_is_resumed(session) != 0
        earlyDataAccepted = gnutls_session_get_flags(session) & GNUTLS_SFLAGS_EARLY_DATA.rawValue != 0
        if callerVerifiesPeer {
            state = .awaitingVerdict
            events.append(.peerAwaitingVerdict)
        } else {
            state = .established
            events.append(.handshakeCompleted)
        }
        if role == .client && !earlyData.isEmpty && !earlyDataAccepted {
            events.append(.earlyDataRejected(byteCount: earlyData.count))
        }
        // A TLS 1.2 ticket arrives inside the handshake; GnuTLS can export it only now.
        if ticketArrived { takeTicket(events: &events) }
    }

    /// The caller accepts the peer it was asked about (`.peerAwaitingVerdict`): the next
    /// `process` reports `.handshakeCompleted` and goes on with what arrived meanwhile.
    public func acceptPeer() {
        guard case .awaitingVerdict = state else { return }
        state = .established
        announcesCompletion = true
    }

    /// The caller refuses the peer: the connection fails with `.certificateRejected(.rejected)`,
    /// and a bad_certificate alert is queued in the pending ciphertext (flush it before closing).
    public func rejectPeer() {
        guard case .awaitingVerdict = state else { return }
        certificateProblem = .rejected
        state = .failed(.certificateRejected(.rejected))
        _ = gnutls_alert_send(session, GNUTLS_AL_FATAL, GNUTLS_A_BAD_CERTIFICATE)
    }

    /// Server: hands out the 0-RTT plaintext GnuTLS has buffered so far.
    private func deliverEarlyData(_ deliver: (UnsafeRawBufferPointer) -> Void) {
        guard serverContext?.antiReplay != nil else { return }
        let scratch = earlyDataScratch ?? .allocate(byteCount: Self.maxRecordPayload, alignment: 16)
        earlyDataScratch = scratch
        while true {
            let n = gnutls_record_recv_early_data(session, scratch.baseAddress, scratch.count)
            guard n > 0 else { return }
            deliver(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
        }
    }

    /// Decrypts every complete record in the input, zero-copy (`gnutls_record_recv_packet`).
    private func receiveRecords(deliver: (UnsafeRawBufferPointer) -> Void, events: inout [TLSEvent]) throws(TLSError) {
        while !peerClosed {
            let consumedBefore = input.totalConsumed
            var packet: gnutls_packet_t?
            let n = gnutls_record_recv_packet(session, &packet)
            if let packet {
                var datum = gnutls_datum_t()
                gnutls_packet_get(packet, &datum, nil)
                if datum.size > 0 { deliver(UnsafeRawBufferPointer(start: datum.data, count: Int(datum.size))) }
                gnutls_packet_deinit(packet)
                continue
            }
            if n == 0 {
                peerClosed = true
                events.append(.peerClosed)
                break
            }
            switch Int32(n) {
            case GNUTLS_E_AGAIN, GNUTLS_E_INTERRUPTED, GNUTLS_E_WARNING_ALERT_RECEIVED, GNUTLS_E_REHANDSHAKE:
                // Post-handshake messages (tickets, key updates) and warnings also end a call;
                // renegotiation requests are ignored (we never renegotiate).
                if ticketArrived { takeTicket(events: &events) }
                if input.totalConsumed == consumedBefore { return }
            default:
                throw fail(Int32(n), in: "gnutls_record_recv_packet")
            }
        }
        if ticketArrived { takeTicket(events: &events) }
    }

    /// Client: turns the session GnuTLS just stored into a `.sessionTicket` event.
    private func takeTicket(events: inout [TLSEvent]) {
        ticketArrived = false
        guard role == .client, clientContext?.configuration.sessionTicketsEnabled == true else { return }
        var data = gnutls_datum_t()
        guard gnutls_session_get_data2(session, &data) == 0, let bytes = data.data else { return }
        defer { braid_gnutls_free(bytes) }
        // TLS 1.3 without a ticket yields a tiny placeholder that cannot resume.
        guard data.size > 8 else { return }
        let ticket = TLSSessionTicket(
            serverName: serverName, alpn: negotiatedALPN,
            maxEarlyDataSize: negotiatedVersion == .v1_3 ? ticketMaxEarlyData : 0,
            sessionData: Array(UnsafeBufferPointer(start: bytes, count: Int(data.size))),
            validity: negotiatedVersion == .v1_3 ? ticketValidity : nil)
        events.append(.sessionTicket(ticket))
    }

    /// The transport delivered EOF. Call `process` first for bytes already received. Without the
    /// peer's close_notify this throws `TLSError.truncated`: the data may have been cut short.
    public func endOfInput() throws(TLSError) {
        inputEnded = true
        if case .failed(let error) = state { throw error }
        guard peerClosed else {
            state = .failed(.truncated)
            throw .truncated
        }
    }
}
