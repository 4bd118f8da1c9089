import CBraid

/// Failures: the error the caller sees and the alert the peer gets.
extension TLSConnection {
    /// Marks the connection failed with the error `rc` stands for, queues the alert GnuTLS would
    /// send (or the one naming our certificate complaint), and returns the error to throw.
    func fail(_ rc: Int32, in function: String) -> TLSError {
        let error = tlsError(for: rc, in: function)
        state = .failed(error)
        if let problem = certificateProblem {
            var alert = BraidTLS.alert(for: problem)
            // certificate_required is TLS 1.3's; TLS 1.2 answers a missing one with handshake_failure.
            if alert == GNUTLS_A_CERTIFICATE_REQUIRED && gnutls_protocol_get_version(session) != GNUTLS_TLS1_3 {
                alert = GNUTLS_A_HANDSHAKE_FAILURE
            }
            _ = gnutls_alert_send(session, GNUTLS_AL_FATAL, alert)
        } else if error == .protocolVersionMismatch && sendsAlert(rc) {
            _ = gnutls_alert_send(session, GNUTLS_AL_FATAL, GNUTLS_A_PROTOCOL_VERSION)
        } else if sendsAlert(rc) {
            _ = gnutls_alert_send_appropriate(session, rc)
        }
        return error
    }

    /// Errors the peer caused by telling us (an alert) or by vanishing get no alert back.
    private func sendsAlert(_ rc: Int32) -> Bool {
        rc != GNUTLS_E_FATAL_ALERT_RECEIVED && rc != GNUTLS_E_PREMATURE_TERMINATION && rc != GNUTLS_E_PULL_ERROR
            && rc != GNUTLS_E_PUSH_ERROR
    }

    /// Server: the client's hello offers a version we allow (true while unknown).
    private var clientOffersAllowedVersion: Bool {
        guard let offered = clientOfferedVersions, let configuration = serverContext?.configuration else { return true }
        return offered.contains { configuration.minimumVersion <= $0 && $0 <= configuration.maximumVersion }
    }

    private func tlsError(for rc: Int32, in function: String) -> TLSError {
        let handshaking = !isHandshakeComplete
        if rc == GNUTLS_E_FATAL_ALERT_RECEIVED {
            let code = UInt8(truncatingIfNeeded: gnutls_alert_get(session).rawValue)
            switch code {
            case 120 where role == .client: return .alpnMismatch(offered: clientContext!.configuration.alpn)
            case 70: return .protocolVersionMismatch
            default: return .peerAlert(code: code, name: tlsAlertName(code))
            }
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
        case GNUTLS_E_PREMATURE_TERMINATION:
            return .truncated
        case _ where handshaking && role == .server && !clientOffersAllowedVersion:
            // GnuTLS 3.7 reports a version mismatch as "no cipher suites" on the server.
            return .protocolVersionMismatch
        case GNUTLS_E_MEMORY_ERROR, GNUTLS_E_INTERNAL_ERROR, GNUTLS_E_INVALID_REQUEST, GNUTLS_E_INVALID_SESSION:
            return .internalError(function: function, code: rc)
        default:
            let what = "\(gnutlsErrorString(rc)) (\(rc))"
            return handshaking ? .handshakeFailed(what) : .protocolError(what)
        }
    }
}
