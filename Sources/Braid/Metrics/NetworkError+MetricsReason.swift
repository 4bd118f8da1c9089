extension NetworkError {
    /// The `reason` label of `braid_connections_failed_total` and
    /// `braid_connections_closed_total`: a few fixed words, so the label's values stay bounded
    /// (the error's details, such as host names, stay in the logs).
    var metricsReason: String {
        switch self {
        case .cancelled: "cancelled"
        case .peerClosed: "peer_closed"
        case .idleTimeout: "idle_timeout"
        case .noResponse: "timeout"
        case .connectionRefused: "refused"
        case .serverBusy: "server_busy"
        case .connectionReset, .peerReset: "reset"
        case .dnsNameNotFound, .dnsFailure: "dns"
        case .certificateRejected: "certificate"
        case .handshakeRejectedByPeer, .alpnMismatch, .tlsFailure, .truncated: "tls"
        case .protocolError, .http3ProtocolError, .webSocketProtocolError, .webSocketHandshakeFailed: "protocol_error"
        case .noAllowedInterface: "no_allowed_interface"
        case .unsupported, .invalidConfiguration: "configuration"
        case .system: "system"
        default: "other"
        }
    }
}
