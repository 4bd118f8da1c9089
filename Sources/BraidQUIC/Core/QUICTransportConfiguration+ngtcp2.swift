import CBraid

/// The transport configuration in ngtcp2's terms, shared by clients and servers.
extension QUICTransportConfiguration {
    /// Rejects values ngtcp2 or RFC 9000 cannot take, before any connection is made with them.
    func validate() throws {
        guard (1200...65527).contains(maxUDPPayloadSize) else {
            throw QUICError.configuration("maxUDPPayloadSize must be 1200...65527, got \(maxUDPPayloadSize)")
        }
        guard (2...8).contains(activeConnectionIDLimit) else {
            throw QUICError.configuration("activeConnectionIDLimit must be 2...8")
        }
        let limit: UInt64 = 1 << 62 - 1
        for value in [initialMaxData, initialMaxStreamDataBidirectionalLocal,
                      initialMaxStreamDataBidirectionalRemote, initialMaxStreamDataUnidirectional,
                      initialMaxBidirectionalStreams, initialMaxUnidirectionalStreams,
                      maxConnectionWindow, maxStreamWindow] where value > limit {
            throw QUICError.configuration("flow-control limits must be below 2^62")
        }
    }

    /// Local settings for a connection starting at `now`.
    func ngtcp2Settings(now: QUICInstant) -> ngtcp2_settings {
        var settings = ngtcp2_settings()
        braid_ngtcp2_settings_default(&settings)
        settings.initial_ts = now.nanoseconds
        settings.cc_algo = switch congestionControl {
        case .reno: NGTCP2_CC_ALGO_RENO
        case .cubic: NGTCP2_CC_ALGO_CUBIC
        case .bbr: NGTCP2_CC_ALGO_BBR
        }
        settings.max_tx_udp_payload_size = maxUDPPayloadSize
        // ngtcp2 0.12.1's discovery never goes past 1,444: a larger maximum (jumbo frames) is
        // taken as known, and used without it.
        settings.no_tx_udp_payload_size_shaping = maxUDPPayloadSize > Self.standardMaxUDPPayloadSize ? 1 : 0
        settings.handshake_timeout = handshakeTimeout.nanosecondsClamped
        // Tuned by Braid instead (`ReceiveWindowLedger`): ngtcp2's own growth would be invisible.
        settings.max_window = tunesReceiveWindows ? 0 : maxConnectionWindow
        settings.max_stream_window = tunesReceiveWindows ? 0 : maxStreamWindow
        settings.no_pmtud = pathMTUDiscovery ? 0 : 1
        return settings
    }

    /// The transport parameters we announce to the peer.
    func ngtcp2TransportParameters() -> ngtcp2_transport_params {
        var params = ngtcp2_transport_params()
        braid_ngtcp2_transport_params_default(&params)
        params.initial_max_data = initialMaxData
        params.initial_max_stream_data_bidi_local = initialMaxStreamDataBidirectionalLocal
        params.initial_max_stream_data_bidi_remote = initialMaxStreamDataBidirectionalRemote
        params.initial_max_stream_data_uni = initialMaxStreamDataUnidirectional
        params.initial_max_streams_bidi = initialMaxBidirectionalStreams
        params.initial_max_streams_uni = initialMaxUnidirectionalStreams
        params.max_idle_timeout = idleTimeout.nanosecondsClamped
        params.active_connection_id_limit = activeConnectionIDLimit
        params.max_datagram_frame_size = maxDatagramFrameSize
        return params
    }
}
