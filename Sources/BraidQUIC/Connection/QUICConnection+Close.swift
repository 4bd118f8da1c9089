import CBraid
import Logging

/// Closing (RFC 9000 §10): our CONNECTION_CLOSE and the closing period, the peer's and the
/// draining period, silent termination, and what ngtcp2's errors mean as a `QUICError`.
extension QUICConnection {
    /// Closes the connection with an application error code (0 = no error) and reason.
    /// Pending stream data is abandoned; the peer sees `applicationClosed(code, reason)`.
    package func close(applicationErrorCode code: UInt64 = 0, reason: String = "", now: QUICInstant) {
        guard !isClosed else { return }
        var ccerr = ngtcp2_connection_close_error()
        let reasonBytes = Array(reason.utf8.prefix(1024))
        reasonBytes.withUnsafeBufferPointer {
            ngtcp2_connection_close_error_set_application_error(&ccerr, code, UnsafeMutablePointer(mutating: $0.baseAddress), $0.count)
            startClosing(ccerr: ccerr, reason: .closedLocally(code: code, reason: reason), now: now)
        }
    }

    /// Closes with CONNECTION_REFUSED and `reason`: a server's refusal of a client it had
    /// already taken (a Braid client reports `serverBusy`, as for the endpoint's own refusals).
    package func refuse(reason: String, now: QUICInstant) {
        close(transportErrorCode: UInt64(NGTCP2_CONNECTION_REFUSED), reason: reason, now: now)
    }

    /// Closes with a transport error `code` (a CONNECTION_CLOSE of type 0x1c) and `reason`
    /// (its first 1,024 bytes on the wire).
    func close(transportErrorCode code: UInt64, reason: String, now: QUICInstant) {
        guard !isClosed else { return }
        let bytes = Array(reason.utf8.prefix(1024))
        bytes.withUnsafeBufferPointer {
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error(&ccerr, code, UnsafeMutablePointer(mutating: $0.baseAddress), $0.count)
            startClosing(ccerr: ccerr, reason: .transportError(code: code, reason: reason, byPeer: false), now: now)
        }
    }

    func startClosing(ccerr: ngtcp2_connection_close_error, reason: QUICError, now: QUICInstant) {
        guard !isClosed else { return }
        var ccerr = ccerr
        var info = ngtcp2_pkt_info()
        ngtcp2_path_storage_zero(pathStorage)
        var packet = [UInt8](repeating: 0, count: maxPacketSize)
        let written = packet.withUnsafeMutableBufferPointer { buffer in
            braid_ngtcp2_conn_write_connection_close(conn, writePath, &info, buffer.baseAddress!, buffer.count, &ccerr, now.nanoseconds)
        }
        failAll(reason)
        closeReason = reason
        emit(.connectionClosed(reason))
        guard written > 0 else {
            // Nothing was ever sent (or no keys yet): there is no peer state to close.
            terminate(reason: reason)
            return
        }
        packet.removeSubrange(written...)
        closePacket.store(packet)
        phase = .closing(deadline: now + threePTO)
        logger.debug("closing: \(reason)")
    }

    private func enterDraining(reason: QUICError, now: QUICInstant) {
        guard !isClosed else { return }
        failAll(reason)
        closeReason = reason
        emit(.connectionClosed(reason))
        phase = .draining(deadline: now + threePTO)
        logger.debug("draining: \(reason)")
    }

    private var threePTO: Duration { .nanoseconds(Int64(clamping: 3 * ngtcp2_conn_get_pto(conn))) }

    func terminate(reason: QUICError) {
        if case .terminated = phase { return }
        if closeReason == nil {
            closeReason = reason
            failAll(reason)
            emit(.connectionClosed(reason))
        }
        phase = .terminated
        emit(.terminated)
        recordRoutingChange(.terminated)
    }

    /// Drops queued application data: nothing more will move on this connection.
    private func failAll(_ reason: QUICError) {
        pendingDatagrams.removeAll()
        sendSchedule.removeAll()
        sendTurnBytes = 0
        for stream in streams.values {
            sendBudget.released(stream.send.unacknowledged)
            stream.send.discard()
            stream.scheduled = false
        }
    }

    /// Application calls fail once the connection is closing.
    func ensureOpen() throws {
        if isClosed { throw QUICError.connectionClosed(closeReason ?? .invalidState("closed")) }
    }

    // MARK: - Errors

    /// What a failed `read_pkt` means for the connection.
    func handleReadError(_ rc: Int32, now: QUICInstant) {
        switch rc {
        case NGTCP2_ERR_DRAINING:
            enterDraining(reason: peerCloseReason(), now: now)
        case NGTCP2_ERR_DROP_CONN, NGTCP2_ERR_RETRY:
            // Server: the first packet did not start a usable connection; drop it silently.
            terminate(reason: .invalidState("first packet did not start a connection"))
        case NGTCP2_ERR_CRYPTO:
            let alert = ngtcp2_conn_get_tls_alert(conn)
            let reason = localTLSFailure(alert: alert)
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, alert, nil, 0)
            startClosing(ccerr: ccerr, reason: reason, now: now)
        case NGTCP2_ERR_RECV_VERSION_NEGOTIATION:
            terminate(reason: .versionNegotiationFailed)
        default:
            // Every other error is the peer's violation (or our failure) and ends the
            // connection, fatal or not: ngtcp2 0.12.1 leaves closing to us, and a connection it
            // refused a packet of is not safe to keep serving (RFC 9000 §10.2).
            closeOnLibraryError(rc, now: now)
        }
    }

    /// Closes with the transport error code ngtcp2 maps `rc` to, and a reason phrase that says
    /// what the peer did, for the peer's CONNECTION_CLOSE and our own `QUICError`.
    func closeOnLibraryError(_ rc: Int32, now: QUICInstant) {
        let phrase = Self.violationPhrase(rc)
        let bytes = Array(phrase.utf8)
        bytes.withUnsafeBufferPointer {
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error_liberr(
                &ccerr, rc, UnsafeMutablePointer(mutating: $0.baseAddress), $0.count)
            startClosing(ccerr: ccerr, reason: .transportError(code: ccerr.error_code, reason: phrase, byPeer: false), now: now)
        }
    }

    /// What ngtcp2's error says the peer did, as the reason phrase of our CONNECTION_CLOSE.
    static func violationPhrase(_ rc: Int32) -> String {
        switch rc {
        case NGTCP2_ERR_STREAM_LIMIT: "the peer opened more streams than the limit we advertised"
        case NGTCP2_ERR_FLOW_CONTROL: "the peer sent data past the stream's or the connection's flow-control limit"
        case NGTCP2_ERR_FINAL_SIZE: "the peer changed a stream's final size or sent data past it"
        case NGTCP2_ERR_STREAM_STATE: "the peer sent a frame for a stream in a state that forbids it"
        case NGTCP2_ERR_FRAME_ENCODING: "the peer sent a malformed frame"
        case NGTCP2_ERR_ACK_FRAME: "the peer sent an invalid ACK frame"
        case NGTCP2_ERR_TRANSPORT_PARAM, NGTCP2_ERR_MALFORMED_TRANSPORT_PARAM, NGTCP2_ERR_REQUIRED_TRANSPORT_PARAM:
            "the peer's transport parameters are invalid"
        case NGTCP2_ERR_CONNECTION_ID_LIMIT: "the peer issued more connection IDs than our limit"
        case NGTCP2_ERR_CRYPTO_BUFFER_EXCEEDED: "the peer sent more CRYPTO data than we buffer"
        case NGTCP2_ERR_AEAD_LIMIT_REACHED: "too many packets failed authentication (AEAD limit)"
        case NGTCP2_ERR_NO_VIABLE_PATH: "no usable network path"
        case NGTCP2_ERR_PROTO: "the peer violated the protocol"
        // At 0.12.1 ngtcp2 returns this only for a stream's 1,000th gap of out-of-order data.
        case NGTCP2_ERR_INTERNAL: "the peer fragmented a stream into too many out-of-order pieces"
        default: ngtcp2ErrorName(rc)
        }
    }

    /// Why our own TLS stack failed the handshake.
    private func localTLSFailure(alert: UInt8) -> QUICError {
        if let certificateProblem { return .certificateRejected(certificateProblem) }
        if alert == 120 { return .alpnMismatch(offered: offeredALPNForErrors) }
        return .tls("handshake failed locally with alert \(alert) (\(tlsAlertName(alert)))")
    }

    /// The reason the peer gave in its CONNECTION_CLOSE.
    private func peerCloseReason() -> QUICError {
        if receivedStatelessReset { return .statelessReset }
        var ccerr = ngtcp2_connection_close_error()
        ngtcp2_conn_get_connection_close_error(conn, &ccerr)
        let reason = ccerr.reason.map { String(decoding: UnsafeBufferPointer(start: $0, count: ccerr.reasonlen), as: UTF8.self) } ?? ""
        if ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION {
            return .applicationClosed(code: ccerr.error_code, reason: reason)
        }
        if (0x100...0x1ff).contains(ccerr.error_code) {
            let alert = UInt8(ccerr.error_code & 0xff)
            if alert == 120 { return .alpnMismatch(offered: offeredALPNForErrors) }
            return .peerTLSAlert(code: alert)
        }
        return .transportError(code: ccerr.error_code, reason: reason, byPeer: true)
    }

    /// What a failed write means for the connection.
    func handleWriteError(_ rc: Int32, now: QUICInstant) {
        switch rc {
        case NGTCP2_ERR_DRAINING:
            enterDraining(reason: peerCloseReason(), now: now)
        case NGTCP2_ERR_CLOSING:
            break
        default:
            closeOnLibraryError(rc, now: now)
        }
    }
}
