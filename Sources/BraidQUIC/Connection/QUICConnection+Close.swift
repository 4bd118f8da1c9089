import CBraid

/// Closing (RFC 9000 §10): our CONNECTION_CLOSE and the closing period, the peer's and the
/// draining period, silent termination, and what ngtcp2's errors mean as a `QUICError`.
extension QUICConnection {
    /// Closes the connection with an application error code (0 = no error) and reason.
    /// Pending stream data is abandoned; the peer sees `applicationClosed(code, reason)`.
    public func close(applicationErrorCode code: UInt64 = 0, reason: String = "", now: QUICInstant) {
        guard !isClosed else { return }
        var ccerr = ngtcp2_connection_close_error()
        let reasonBytes = Array(reason.utf8.prefix(1024))
        reasonBytes.withUnsafeBufferPointer {
            ngtcp2_connection_close_error_set_application_error(&ccerr, code, UnsafeMutablePointer(mutating: $0.baseAddress), $0.count)
            startClosing(ccerr: ccerr, reason: .closedLocally(code: code, reason: reason), now: now)
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
        for stream in streams.values {
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
            guard ngtcp2_err_is_fatal(rc) != 0 else { return }
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, rc, nil, 0)
            startClosing(
                ccerr: ccerr,
                reason: .transportError(code: ccerr.error_code, reason: ngtcp2ErrorName(rc), byPeer: false), now: now)
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
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, rc, nil, 0)
            startClosing(ccerr: ccerr, reason: .transportError(code: ccerr.error_code, reason: ngtcp2ErrorName(rc), byPeer: false), now: now)
        }
    }
}
