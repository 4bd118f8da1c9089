import CBraid

/// Datagrams in and out: the handshake, messages, close_notify and failures.
extension DTLSConnection {
    /// Queues a datagram from the peer for the next `process`. Returns false, dropping it, when
    /// `inboxLimit` datagrams already wait (counted in `droppedInboundDatagramCount`; the peer
    /// retransmits what matters): call `process` and offer it again to lose nothing.
    @discardableResult
    public func receiveDatagram(_ datagram: UnsafeRawBufferPointer) -> Bool {
        guard !datagram.isEmpty else { return false }
        guard inbox.count < Self.inboxLimit else {
            droppedInboundDatagramCount += 1
            return false
        }
        inbox.append(Array(datagram))
        return true
    }

    /// Received datagrams not yet processed (at most `inboxLimit`).
    public var pendingInboundDatagramCount: Int { inbox.count }

    /// Advances the handshake (retransmitting a flight whose timer ran out) and hands every
    /// received message to `deliver` in order, without copying it (the pointer is valid only
    /// during the call). Returns what happened besides messages.
    ///
    /// Datagrams that fail authentication or arrive out of the replay window are dropped, as
    /// DTLS requires. Throws a `TLSError` when the connection fails; the alert telling the peer
    /// why (if any) is queued, so send the pending datagrams before closing. Every later call
    /// throws the same error.
    public func process(deliver: (UnsafeRawBufferPointer) -> Void) throws(TLSError) -> [TLSEvent] {
        var events: [TLSEvent] = []
        switch state {
        case .failed(let error):
            throw error
        case .notStarted:
            state = .handshaking
            fallthrough
        case .handshaking:
            guard try advanceHandshake(events: &events), isHandshakeComplete else { return events }
        case .awaitingVerdict:
            // Nothing from an unjudged peer reaches the caller: its datagrams stay queued.
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

    /// Runs the handshake as far as the queued datagrams allow; true once complete.
    private func advanceHandshake(events: inout [TLSEvent]) throws(TLSError) -> Bool {
        while true {
            let before = inbox.count
            let rc = gnutls_handshake(session)
            if rc == 0 {
                completeHandshake(events: &events)
                return true
            }
            if gnutls_error_is_fatal(rc) != 0 || rc == GNUTLS_E_TIMEDOUT { throw fail(rc, in: "gnutls_handshake") }
            // Again, or a dropped datagram or warning: go on while datagrams are being read.
            if inbox.isEmpty || inbox.count == before { return false }
        }
    }

    private func completeHandshake(events: inout [TLSEvent]) {
        negotiatedALPN = BraidTLS.negotiatedALPN(session)
        if callerVerifiesPeer {
            state = .awaitingVerdict
            events.append(.peerAwaitingVerdict)
        } else {
            state = .established
            events.append(.handshakeCompleted)
        }
    }

    /// The caller accepts the peer it was asked about (`.peerAwaitingVerdict`): the next
    /// `process` reports `.handshakeCompleted` and goes on with what arrived meanwhile.
    public func acceptPeer() {
        guard case .awaitingVerdict = state else { return }
        state = .established
        announcesCompletion = true
    }

    /// The caller refuses the peer: the connection fails with `.certificateRejected(.rejected)`,
    /// and a bad_certificate alert is queued (send it before closing).
    public func rejectPeer() {
        guard case .awaitingVerdict = state else { return }
        certificateProblem = .rejected
        state = .failed(.certificateRejected(.rejected))
        _ = gnutls_alert_send(session, GNUTLS_AL_FATAL, GNUTLS_A_BAD_CERTIFICATE)
    }

    /// Decrypts every record in the queued datagrams, zero-copy (`gnutls_record_recv_packet`).
    private func receiveRecords(deliver: (UnsafeRawBufferPointer) -> Void, events: inout [TLSEvent]) throws(TLSError) {
        while !peerClosed {
            let before = inbox.count
            var packet: gnutls_packet_t?
            let n = gnutls_record_recv_packet(session, &packet)
            if let packet {
                var datum = gnutls_datum_t()
                gnutls_packet_get(packet, &datum, nil)
                deliver(UnsafeRawBufferPointer(start: datum.data, count: Int(datum.size)))
                gnutls_packet_deinit(packet)
                continue
            }
            if n == 0 {
                peerClosed = true
                events.append(.peerClosed)
                return
            }
            // Forged, replayed or stray datagrams are dropped without failing (RFC 6347
            // §4.1.2.7): only a fatal error, such as a fatal alert, ends the connection.
            if gnutls_error_is_fatal(Int32(n)) != 0 { throw fail(Int32(n), in: "gnutls_record_recv_packet") }
            if inbox.isEmpty || inbox.count == before { return }
        }
    }

    /// Encrypts `message` into one record in one datagram. Returns false, sending nothing, when
    /// `outboxLimit` datagrams wait to be sent: send them first. Throws
    /// `TLSError.messageTooLarge` when the message exceeds `maximumMessageSize`.
    public func send(_ message: UnsafeRawBufferPointer) throws(TLSError) -> Bool {
        switch state {
        case .failed(let error): throw error
        case .established: break
        default: throw .invalidState("send before the DTLS handshake completed")
        }
        guard !closeSent else { throw .invalidState("send after close") }
        let maximum = maximumMessageSize
        guard message.count <= maximum else { throw .messageTooLarge(size: message.count, maximum: maximum) }
        guard outbox.count < Self.outboxLimit else { return false }
        let rc = gnutls_record_send(session, message.baseAddress, message.count)
        if rc == Int(GNUTLS_E_LARGE_PACKET) { throw .messageTooLarge(size: message.count, maximum: maximumMessageSize) }
        if rc < 0 { throw fail(Int32(rc), in: "gnutls_record_send") }
        return true
    }

    /// Datagrams waiting to be sent.
    public var pendingDatagramCount: Int { outbox.count }

    /// The oldest datagram waiting to be sent, removed from the queue (nil: none).
    public func popDatagram() -> [UInt8]? {
        outbox.isEmpty ? nil : outbox.removeFirst()
    }

    /// Queues close_notify: we send nothing more. Idempotent; does nothing on a failed
    /// connection (its alert is already queued) or before the handshake completed.
    public func close() {
        guard !closeSent, isHandshakeComplete else { return }
        closeSent = true
        _ = gnutls_bye(session, GNUTLS_SHUT_WR)
    }

    /// Marks the connection failed with the error `rc` stands for, queues the alert that tells
    /// the peer why, and returns the error to throw.
    func fail(_ rc: Int32, in function: String) -> TLSError {
        let error = dtlsError(for: rc, in: function)
        state = .failed(error)
        if let problem = certificateProblem {
            let alert = BraidTLS.alert(for: problem)
            // certificate_required is TLS 1.3's; DTLS 1.2 answers a missing one with handshake_failure.
            _ = gnutls_alert_send(session, GNUTLS_AL_FATAL, alert == GNUTLS_A_CERTIFICATE_REQUIRED ? GNUTLS_A_HANDSHAKE_FAILURE : alert)
        } else if rc != GNUTLS_E_FATAL_ALERT_RECEIVED && rc != GNUTLS_E_TIMEDOUT {
            _ = gnutls_alert_send_appropriate(session, rc)
        }
        return error
    }

    private func dtlsError(for rc: Int32, in function: String) -> TLSError {
        if rc == GNUTLS_E_FATAL_ALERT_RECEIVED {
            let code = UInt8(truncatingIfNeeded: gnutls_alert_get(session).rawValue)
            if code == 120 && role == .client { return .alpnMismatch(offered: clientContext!.configuration.alpn) }
            return code == 70 ? .protocolVersionMismatch : .peerAlert(code: code, name: tlsAlertName(code))
        }
        if let certificateProblem { return .certificateRejected(certificateProblem) }
        switch rc {
        case GNUTLS_E_CERTIFICATE_REQUIRED:
            certificateProblem = .missing
            return .certificateRejected(.missing)
        case GNUTLS_E_NO_CERTIFICATE_FOUND where role == .server:
            certificateProblem = .missing
            return .certificateRejected(.missing)
        case GNUTLS_E_NO_APPLICATION_PROTOCOL:
            return .alpnMismatch(offered: role == .client ? clientContext!.configuration.alpn : clientOfferedALPN ?? [])
        case GNUTLS_E_UNSUPPORTED_VERSION_PACKET:
            return .protocolVersionMismatch
        case GNUTLS_E_TIMEDOUT:
            return .handshakeFailed("the peer stopped answering (GnuTLS's DTLS handshake limit ran out)")
        case GNUTLS_E_MEMORY_ERROR, GNUTLS_E_INTERNAL_ERROR, GNUTLS_E_INVALID_REQUEST, GNUTLS_E_INVALID_SESSION:
            return .internalError(function: function, code: rc)
        default:
            let what = "\(gnutlsErrorString(rc)) (\(rc))"
            return isHandshakeComplete ? .protocolError(what) : .handshakeFailed(what)
        }
    }
}
