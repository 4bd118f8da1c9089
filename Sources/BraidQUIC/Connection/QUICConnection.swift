#if canImport(Glibc)
import Glibc
#endif
import CBraid
import DequeModule
import Logging

/// One QUIC connection (client or server side): an `ngtcp2_conn` plus its GnuTLS session.
///
/// Sans-IO: the owner feeds it datagrams (`receive`), timer expiries (`handleTimeout`) and
/// application calls, always with the current time, and pulls out packets to send
/// (`writeTransmits` / `pollTransmits`), the next deadline (`nextDeadline`) and events
/// (`pollEvent`). It never touches a socket, a clock or a thread, so tests drive it on a
/// virtual clock. Not thread-safe: one owner (one event loop) drives it.
///
/// ```swift
/// let context = try QUICClientContext(configuration: .init(alpn: ["echo"]))
/// let client = try context.connect(path: path, serverName: "localhost", now: now)
/// for transmit in client.pollTransmits(now: now) { send(transmit) }
/// // ... feed replies with client.receive(...), then once .handshakeCompleted arrives:
/// let id = try client.openStream(bidirectional: true)
/// try client.send(streamID: id, bytes: Array("hello".utf8), fin: true, now: now)
/// ```
public final class QUICConnection {
    public enum Role: Sendable { case client, server }

    enum Phase {
        case handshaking
        case established
        case closing(deadline: QUICInstant)
        case draining(deadline: QUICInstant)
        case terminated
    }

    public let role: Role
    /// Set once in `init` (ngtcp2 needs `self` as callback context before it can exist).
    private(set) var conn: OpaquePointer!
    private(set) var session: gnutls_session_t!
    private let connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>
    private let pathStorage: UnsafeMutablePointer<ngtcp2_path_storage>
    let transport: QUICTransportConfiguration
    let staticSecret: [UInt8]
    var logger: Logger

    var phase: Phase = .handshaking
    /// Why the connection ended; set when it starts closing or draining.
    public private(set) var closeReason: QUICError?

    var streams: [Int64: StreamState] = [:]
    /// Streams with bytes to send, in round-robin order; an entry whose `scheduled` is false has
    /// left the schedule and is dropped when reached.
    var sendSchedule = Deque<StreamState>()
    var pendingDatagrams = Deque<(id: UInt64, bytes: [UInt8])>()
    private var nextDatagramID: UInt64 = 0
    var events = Deque<QUICEvent>()

    /// Packet-assembly area: room for one full GSO batch of maximum-size packets.
    private let scratch: UnsafeMutableRawBufferPointer
    private let maxPacketSize: Int
    public static let maxSegmentsPerBatch = 64
    /// Largest batch in bytes: the UDP payload limit of one IPv4 datagram (65535 - 20 - 8).
    public static let maxBatchBytes = 65507
    private var closePacket: [UInt8] = []
    private var packetsReceivedWhileClosing = 0
    private var closePacketPending = false
    /// A packet written but not yet emitted because it could not join the previous batch.
    private var heldPacket: (offset: Int, length: Int, path: QUICPath, ecn: ECN)?
    /// Stream-data scatter list handed to ngtcp2 (reused: no allocation per packet).
    private let vecs: UnsafeMutableBufferPointer<ngtcp2_vec>
    private static let maxVecs = 16

    /// Server: changes the endpoint's routing table must follow, oldest first, until the endpoint
    /// applies them (`QUICServerEndpoint.applyRoutingChanges(of:)`). Empty in steady state.
    var routingChanges: [QUICRoutingChange] = []
    /// Server: first byte of the connection IDs we issue (the endpoint's routing tag).
    var connectionIDTag: UInt8?
    /// Server: this connection was created by the datagram just passed to the endpoint.
    public internal(set) var isNewlyAccepted = false

    // TLS state.
    let verification: QUICCertificateVerification?
    /// The name we verify the server certificate against (client) / "" (server).
    public let serverName: String
    var certificateProblem: CertificateProblem?
    var attemptedEarlyData = false
    /// The ALPN both sides agreed on, once the handshake completed.
    public internal(set) var negotiatedALPN: String?
    /// Client: the server accepted our 0-RTT data. Server: this connection received 0-RTT data.
    public internal(set) var earlyDataAccepted = false
    var latestTicket: QUICResumptionTicket?
    var receivedToken: [UInt8] = []
    /// Server: address validation succeeded through a token (Retry or NEW_TOKEN).
    var makeNewToken: ((QUICAddress, QUICInstant) -> [UInt8]?)?

    // Counters for `statistics`.
    var packetsSent: UInt64 = 0
    var bytesSent: UInt64 = 0
    var packetsReceived: UInt64 = 0
    var bytesReceived: UInt64 = 0
    var datagramsLost: UInt64 = 0
    var transmitsWritten: UInt64 = 0

    // Datagram probe (see `updateDatagramProbe`).
    /// Datagrams handed to ngtcp2 and not yet acknowledged or declared lost.
    private var datagramsInFlight = 0
    /// Keep-alive probes sent in a row without a datagram being acknowledged or declared lost.
    private var datagramProbeBackoff = 0
    /// Last send or receive: ngtcp2 counts the keep-alive from the same instants.
    private var lastActivity = QUICInstant(nanoseconds: 0)
    /// The keep-alive the user configured (0: off) and the one currently set on ngtcp2.
    private var configuredKeepAlive: UInt64 = 0
    private var appliedKeepAlive: UInt64 = 0

    private var qlogFile: UnsafeMutablePointer<FILE>?
    /// TLS material the session points into (credentials, ticket key): must outlive `session`.
    var tlsResources: AnyObject?

    struct Setup {
        var role: Role
        var path: QUICPath
        var version: UInt32
        var destinationCID: ConnectionID
        var sourceCID: ConnectionID
        var settings: ngtcp2_settings
        var params: ngtcp2_transport_params
        var qlogODCID: ConnectionID
    }

    /// Creates the ngtcp2 connection, then the TLS session via `makeSession` (which must call
    /// `gnutls_session_set_ptr(session, connRef)`).
    init(
        setup: Setup, transport: QUICTransportConfiguration, staticSecret: [UInt8],
        verification: QUICCertificateVerification?, serverName: String,
        makeSession: (QUICConnection, UnsafeMutablePointer<ngtcp2_crypto_conn_ref>) throws -> gnutls_session_t
    ) throws {
        role = setup.role
        self.transport = transport
        self.staticSecret = staticSecret
        self.verification = verification
        self.serverName = serverName
        logger = Logger(label: "braid.quic")
        logger[metadataKey: "quic.cid"] = "\(setup.sourceCID)"
        maxPacketSize = max(transport.maxUDPPayloadSize, 1200)
        connRef = .allocate(capacity: 1)
        pathStorage = .allocate(capacity: 1)
        // Room for a whole batch of packets as large as path-MTU discovery may grow them.
        scratch = .allocate(byteCount: Self.maxSegmentsPerBatch * 1500 + 65536, alignment: 16)
        vecs = .allocate(capacity: Self.maxVecs)
        connRef.initialize(to: ngtcp2_crypto_conn_ref(
            get_conn: { ref in
                Unmanaged<QUICConnection>.fromOpaque(ref!.pointee.user_data).takeUnretainedValue().conn
            },
            user_data: Unmanaged.passUnretained(self).toOpaque()))

        var settings = setup.settings
        if let directory = transport.qlogDirectory {
            let name = "\(directory)/\(setup.qlogODCID)-\(role == .client ? "client" : "server").sqlog"
            qlogFile = fopen(name, "w")
            if qlogFile != nil {
                settings.qlog.odcid = setup.qlogODCID.ngtcp2
                settings.qlog.write = { userData, _, data, length in
                    let connection = Unmanaged<QUICConnection>.fromOpaque(userData!).takeUnretainedValue()
                    if let file = connection.qlogFile { fwrite(data, 1, length, file) }
                }
            } else {
                logger.warning("cannot open qlog file \(name): \(String(cString: strerror(errno)))")
            }
        }
        if transport.debugLog {
            logger.logLevel = .trace
            braid_set_ngtcp2_log_sink { userData, line in
                let connection = Unmanaged<QUICConnection>.fromOpaque(userData!).takeUnretainedValue()
                connection.logger.trace("\(String(cString: line!))")
            }
            braid_ngtcp2_settings_enable_log(&settings)
        }

        var callbacks = Self.callbacks(for: setup.role)
        var params = setup.params
        var dcid = setup.destinationCID.ngtcp2
        var scid = setup.sourceCID.ngtcp2
        var created: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let rc = setup.path.withNgtcp2Path { path in
            setup.role == .client
                ? braid_ngtcp2_conn_client_new(&created, &dcid, &scid, path, setup.version, &callbacks, &settings, &params, userData)
                : braid_ngtcp2_conn_server_new(&created, &dcid, &scid, path, setup.version, &callbacks, &settings, &params, userData)
        }
        guard rc == 0, let created else {
            releaseResources()
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_new")
        }
        conn = created
        do {
            session = try makeSession(self, connRef)
        } catch {
            releaseResources()
            throw error
        }
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(session))
        if let keepAlive = transport.keepAliveInterval {
            configuredKeepAlive = keepAlive.nanosecondsClamped
            appliedKeepAlive = configuredKeepAlive
            ngtcp2_conn_set_keep_alive_timeout(conn, configuredKeepAlive)
        }
    }

    private func releaseResources() {
        if let conn { ngtcp2_conn_del(conn) }
        if let session { gnutls_deinit(session) }
        if let qlogFile { fclose(qlogFile) }
        conn = nil
        session = nil
        qlogFile = nil
        connRef.deallocate()
        pathStorage.deallocate()
        scratch.deallocate()
        vecs.deallocate()
    }

    deinit { releaseResources() }

    /// Remembered server parameters must be installed before the first packet (client only).
    func installEarlyTransportParameters(_ remembered: RememberedTransportParameters) {
        var params = ngtcp2_transport_params()
        braid_ngtcp2_transport_params_default(&params)
        remembered.apply(to: &params)
        braid_ngtcp2_conn_set_early_remote_transport_params(conn, &params)
        attemptedEarlyData = true
    }

    // MARK: - State

    /// The handshake completed and the connection is not closing.
    public var isEstablished: Bool { if case .established = phase { true } else { false } }

    /// All state is gone; the owner can drop the connection.
    public var isTerminated: Bool { if case .terminated = phase { true } else { false } }

    /// Closing or draining: application calls fail with `connectionClosed`.
    public var isClosed: Bool {
        switch phase {
        case .handshaking, .established: false
        case .closing, .draining, .terminated: true
        }
    }

    /// The path the connection currently uses.
    public var path: QUICPath {
        QUICPath(ngtcp2_conn_get_path(conn).pointee)
    }

    /// Next event, if any.
    public func pollEvent() -> QUICEvent? { events.popFirst() }

    func emit(_ event: QUICEvent) { events.append(event) }

    /// When `handleTimeout` must be called next, or nil if no timer is needed.
    public var nextDeadline: QUICInstant? {
        switch phase {
        case .terminated: return nil
        case .closing(let deadline), .draining(let deadline): return deadline
        case .handshaking, .established:
            let expiry = ngtcp2_conn_get_expiry(conn)
            return expiry == UInt64.max ? nil : QUICInstant(nanoseconds: expiry)
        }
    }

    // MARK: - Input

    /// Processes one UDP datagram (possibly several coalesced QUIC packets) that arrived on `path`.
    public func receive(datagram: UnsafeRawBufferPointer, path: QUICPath, ecn: ECN, now: QUICInstant) {
        switch phase {
        case .terminated, .draining:
            return
        case .closing:
            // RFC 9000 §10.2.1: answer with the cached CONNECTION_CLOSE, but less and less often.
            packetsReceivedWhileClosing += 1
            if packetsReceivedWhileClosing & (packetsReceivedWhileClosing - 1) == 0 { closePacketPending = true }
            return
        case .handshaking, .established:
            break
        }
        currentTime = now
        lastActivity = now
        packetsReceived += 1
        bytesReceived += UInt64(datagram.count)
        var info = ngtcp2_pkt_info(ecn: UInt32(ecn.rawValue))
        let rc = path.withNgtcp2Path { ngPath in
            braid_ngtcp2_conn_read_pkt(
                conn, ngPath, &info, datagram.baseAddress?.assumingMemoryBound(to: UInt8.self), datagram.count,
                now.nanoseconds)
        }
        if rc != 0 { handleReadError(rc, now: now) }
        reopenRejectedStreams()
        updateDatagramProbe()
    }

    public func receive(datagram: [UInt8], path: QUICPath, ecn: ECN = .notECT, now: QUICInstant) {
        datagram.withUnsafeBytes { receive(datagram: $0, path: path, ecn: ecn, now: now) }
    }

    private func handleReadError(_ rc: Int32, now: QUICInstant) {
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

    var offeredALPNForErrors: [String] = []

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

    /// Set by the `recv_stateless_reset` callback: ngtcp2 then drains without a close reason.
    var receivedStatelessReset = false

    /// Call when `nextDeadline` has passed.
    public func handleTimeout(now: QUICInstant) {
        switch phase {
        case .terminated:
            return
        case .closing(let deadline), .draining(let deadline):
            if now >= deadline { terminate(reason: closeReason ?? .idleTimeout) }
            return
        case .handshaking, .established:
            break
        }
        if datagramsInFlight > 0 && now.nanoseconds >= lastActivity.nanoseconds &+ appliedKeepAlive {
            // The shortened keep-alive fires: the next write carries the PING; the timeout
            // doubles only after it (changing it now would un-expire the keep-alive).
            datagramProbeBackoff = min(datagramProbeBackoff + 1, Self.maxDatagramProbeBackoff)
        }
        let rc = ngtcp2_conn_handle_expiry(conn, now.nanoseconds)
        switch rc {
        case 0:
            return
        case NGTCP2_ERR_IDLE_CLOSE:
            // RFC 9000 §10.1: an idle connection is discarded silently.
            terminate(reason: .idleTimeout)
        case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
            terminate(reason: .handshakeTimeout)
        default:
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, rc, nil, 0)
            startClosing(ccerr: ccerr, reason: .transportError(code: ccerr.error_code, reason: ngtcp2ErrorName(rc), byPeer: false), now: now)
        }
    }

    // MARK: - Closing

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

    private func startClosing(ccerr: ngtcp2_connection_close_error, reason: QUICError, now: QUICInstant) {
        guard !isClosed else { return }
        var ccerr = ccerr
        var info = ngtcp2_pkt_info()
        ngtcp2_path_storage_zero(pathStorage)
        let written = braid_ngtcp2_conn_write_connection_close(
            conn, writePath, &info, scratch.baseAddress!.assumingMemoryBound(to: UInt8.self),
            maxPacketSize, &ccerr, now.nanoseconds)
        failAll(reason)
        closeReason = reason
        emit(.connectionClosed(reason))
        guard written > 0 else {
            // Nothing was ever sent (or no keys yet): there is no peer state to close.
            terminate(reason: reason)
            return
        }
        closePacket = Array(UnsafeRawBufferPointer(rebasing: scratch[0..<written]))
        closePacketPending = true
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

    /// Server: notes a change for the endpoint's routing table. A client routes nothing, so it
    /// keeps no record.
    func recordRoutingChange(_ change: QUICRoutingChange) {
        if role == .server { routingChanges.append(change) }
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

    // MARK: - Output

    /// Writes every packet that may go out now into batches and hands each batch to `sink`:
    /// (path, ECN, segment size, bytes). The bytes are valid only during the call.
    /// At most `maxSegments` packets per batch (GSO limit) and `maxBatches` batches per call.
    public func writeTransmits(
        now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch, maxBatches: Int = .max,
        _ sink: (QUICPath, ECN, Int, UnsafeRawBufferPointer) -> Void
    ) {
        let scratch = scratch
        writeTransmits(now: now, maxSegments: maxSegments, maxBatches: maxBatches, into: { scratch }) { path, ecn, segmentSize, length in
            sink(path, ecn, segmentSize, UnsafeRawBufferPointer(rebasing: scratch[0..<length]))
        }
    }

    /// Like `writeTransmits(now:maxSegments:maxBatches:_:)`, but each batch is written straight
    /// into memory the caller owns, so the packets are not copied again on their way to the
    /// socket: `slot` gives the memory for the next batch (at least `maxBatchBytes` bytes; nil
    /// stops writing), and `commit` reports what went into it: (path, ECN, segment size, length).
    public func writeTransmits(
        now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch, maxBatches: Int = .max,
        into slot: () -> UnsafeMutableRawBufferPointer?, commit: (QUICPath, ECN, Int, Int) -> Void
    ) {
        switch phase {
        case .terminated, .draining:
            return
        case .closing:
            if closePacketPending, let buffer = slot() {
                closePacketPending = false
                closePacket.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[0..<$0.count]).copyMemory(from: $0) }
                commit(path, .notECT, closePacket.count, closePacket.count)
                countSent(packets: 1, bytes: closePacket.count)
            }
            return
        case .handshaking, .established:
            break
        }
        let segmentLimit = min(max(maxSegments, 1), Self.maxSegmentsPerBatch)
        let packetSize = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn)
        let quantum = max(1, ngtcp2_conn_get_send_quantum(conn) / max(packetSize, 1))
        var budget = min(quantum, segmentLimit * min(maxBatches, 1 << 20))
        var batches = 0

        while budget > 0 && batches < maxBatches && !isClosed {
            guard let buffer = slot() else { break }
            // Assemble one batch.
            var length = 0
            var segmentSize = 0
            var count = 0
            var batchPath: QUICPath?
            var batchECN = ECN.notECT
            if let held = heldPacket {
                // The held packet starts this batch (memmove: it may already be in `buffer`).
                memmove(buffer.baseAddress!, scratch.baseAddress! + held.offset, held.length)
                heldPacket = nil
                length = held.length
                segmentSize = held.length
                count = 1
                batchPath = held.path
                batchECN = held.ecn
                budget -= 1
            }
            var batchClosed = false
            // A GSO send is one UDP datagram to the kernel: its payload must stay under 64 KiB.
            while count < segmentLimit && budget > 0 && !batchClosed && length + packetSize <= Self.maxBatchBytes {
                let room = min(packetSize, buffer.count - length)
                guard let packet = writePacket(into: buffer.baseAddress! + length, capacity: room, now: now) else { break }
                budget -= 1
                if count > 0 && (packet.path != batchPath || packet.ecn != batchECN || packet.length > segmentSize) {
                    // It starts the next batch. Past this batch's bytes in our own scratch
                    // memory it can stay; in the caller's memory it is kept aside.
                    if buffer.baseAddress == scratch.baseAddress {
                        heldPacket = (length, packet.length, packet.path, packet.ecn)
                    } else {
                        scratch.baseAddress!.copyMemory(from: buffer.baseAddress! + length, byteCount: packet.length)
                        heldPacket = (0, packet.length, packet.path, packet.ecn)
                    }
                    batchClosed = true
                    break
                }
                if count == 0 {
                    segmentSize = packet.length
                    batchPath = packet.path
                    batchECN = packet.ecn
                }
                length += packet.length
                count += 1
                // A short packet can only be the last of a GSO batch.
                if packet.length < segmentSize { batchClosed = true }
            }
            guard count > 0, let batchPath else { break }
            commit(batchPath, batchECN, segmentSize, length)
            countSent(packets: count, bytes: length)
            lastActivity = now
            transmitsWritten += 1
            batches += 1
            if !batchClosed && heldPacket == nil && count < segmentLimit { break }
        }
        if !isClosed {
            // Pacing starts once the handshake is complete. Before that the only RTT is the
            // 333 ms initial guess, which spaces the client's Finished ~21 ms after its Initial
            // even on loopback; handshake flights are small and capped by the amplification
            // limit and the initial window anyway.
            if isEstablished { ngtcp2_conn_update_pkt_tx_time(conn, now.nanoseconds) }
            updateDatagramProbe()
        }
    }

    // MARK: - Datagram probe

    /// ngtcp2 0.12.1 does not arm its probe timeout (PTO) for packets that carry only DATAGRAM
    /// frames (upstream fixed this in v0.14.0). If the ACKs for such a flight are lost while it
    /// fills the congestion window, neither end sends again until the idle timeout. So while
    /// datagrams are unacknowledged, the keep-alive is shortened to the PTO (doubling on each
    /// expiry without progress): after that much silence ngtcp2 sends a PING, whose ACK lets
    /// loss detection run. `datagramWindowAllows` keeps room in the window for that PING.
    private func updateDatagramProbe() {
        guard conn != nil, !isClosed else { return }
        var wanted = configuredKeepAlive
        if datagramsInFlight > 0 {
            let probe = ngtcp2_conn_get_pto(conn) << UInt64(datagramProbeBackoff)
            wanted = wanted == 0 ? probe : min(wanted, probe)
        }
        if wanted != appliedKeepAlive {
            appliedKeepAlive = wanted
            ngtcp2_conn_set_keep_alive_timeout(conn, wanted)
        }
    }

    /// Called by the ack/lost callbacks: the flight made progress.
    func datagramResolved() {
        datagramsInFlight = max(datagramsInFlight - 1, 0)
        datagramProbeBackoff = 0
    }

    /// A datagram may take the congestion window only if a full packet of room stays free
    /// afterwards, for the keep-alive PING described above.
    private var datagramWindowAllows: Bool {
        let packetSize = UInt64(ngtcp2_conn_get_path_max_tx_udp_payload_size(conn))
        return ngtcp2_conn_get_cwnd_left(conn) >= 2 * packetSize
    }

    private static let maxDatagramProbeBackoff = 6

    private func countSent(packets: Int, bytes: Int) {
        packetsSent += UInt64(packets)
        bytesSent += UInt64(bytes)
    }

    /// Convenience for tests and simple owners: the batches `writeTransmits` produces, copied.
    public func pollTransmits(now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch) -> [Transmit] {
        var out: [Transmit] = []
        writeTransmits(now: now, maxSegments: maxSegments) { path, ecn, segmentSize, bytes in
            out.append(Transmit(path: path, ecn: ecn, segmentSize: segmentSize, bytes: Array(bytes)))
        }
        return out
    }

    /// Writes one QUIC packet (coalescing stream frames from several streams, datagrams, ACKs
    /// and control frames) into `dest`. Nil when nothing may be sent now.
    private func writePacket(into dest: UnsafeMutableRawPointer, capacity: Int, now: QUICInstant)
        -> (length: Int, path: QUICPath, ecn: ECN)?
    {
        let buffer = dest.assumingMemoryBound(to: UInt8.self)
        var info = ngtcp2_pkt_info()
        ngtcp2_path_storage_zero(pathStorage)
        let path = writePath
        var rotations = 0
        while true {
            // 1. Datagrams first: they are latency-sensitive and never retransmitted.
            if let datagram = pendingDatagrams.first, datagram.bytes.count > maxDatagramPayloadSize {
                // It fitted when queued, but the path's packets shrank (e.g. after migration).
                pendingDatagrams.removeFirst()
                datagramsLost += 1
                emit(.datagramLost(id: datagram.id))
                continue
            }
            if let datagram = pendingDatagrams.first, datagramWindowAllows {
                var accepted: Int32 = 0
                let written = datagram.bytes.withUnsafeBufferPointer { bytes -> Int in
                    var vec = ngtcp2_vec(base: UnsafeMutablePointer(mutating: bytes.baseAddress), len: bytes.count)
                    return braid_ngtcp2_conn_writev_datagram(
                        conn, path, &info, buffer, capacity, &accepted, UInt32(NGTCP2_WRITE_DATAGRAM_FLAG_MORE),
                        datagram.id, &vec, 1, now.nanoseconds)
                }
                if accepted != 0 {
                    pendingDatagrams.removeFirst()
                    datagramsInFlight += 1
                }
                if written == Int(NGTCP2_ERR_WRITE_MORE) { continue }
                if written > 0 { return (written, QUICPath(path.pointee), ECN(bits: info.ecn)) }
                if written == 0 { return nil }
                if written == Int(NGTCP2_ERR_INVALID_ARGUMENT) || written == Int(NGTCP2_ERR_INVALID_STATE) {
                    // Too large for the peer's limit or datagrams not negotiated: checked on
                    // enqueue, so only reachable if the peer changed its mind; drop it.
                    pendingDatagrams.removeFirst()
                    datagramsLost += 1
                    emit(.datagramLost(id: datagram.id))
                    continue
                }
                handleWriteError(Int32(written), now: now)
                return nil
            }
            // 2. Stream data, round-robin across streams with unsent bytes.
            // After one full rotation without filling the packet, finish it without stream data.
            var streamID: Int64 = -1
            var vecCount = 0
            var flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_NONE)
            var stream: StreamState?
            if rotations < sendSchedule.count, let state = sendSchedule.first {
                // A stream that left the schedule (done, blocked, reset, retired) is dropped here.
                guard state.scheduled else {
                    sendSchedule.removeFirst()
                    continue
                }
                stream = state
                streamID = state.id
                flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_MORE)
                state.send.unsentRegions(limit: Self.maxVecs) { base, count in
                    vecs[vecCount] = ngtcp2_vec(base: UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)), len: count)
                    vecCount += 1
                }
                if state.send.finQueued && !state.send.finSent { flags |= UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) }
            }
            var accepted: ngtcp2_ssize = -1
            let written = braid_ngtcp2_conn_writev_stream(
                conn, path, &info, buffer, capacity, &accepted, flags, streamID, vecs.baseAddress, vecCount, now.nanoseconds)
            if let stream, accepted >= 0 {
                stream.send.markSent(accepted)
                if flags & UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) != 0 && stream.send.unsentCount == 0 {
                    stream.send.finSent = true
                }
            }
            if let stream {
                // Rotate: this stream goes to the back, or leaves the schedule when done/blocked.
                sendSchedule.removeFirst()
                if written == Int(NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                    stream.blocked = true
                    stream.scheduled = false
                } else if written == Int(NGTCP2_ERR_STREAM_SHUT_WR) || written == Int(NGTCP2_ERR_STREAM_NOT_FOUND) {
                    stream.scheduled = false
                    // We did not shut it: the peer's STOP_SENDING did (code not known yet).
                    if !stream.locallyReset { peerStoppedSending(stream, code: nil) }
                } else if stream.send.hasUnsent {
                    sendSchedule.append(stream)
                    rotations += 1
                } else {
                    stream.scheduled = false
                }
            }
            switch written {
            case Int(NGTCP2_ERR_WRITE_MORE), Int(NGTCP2_ERR_STREAM_DATA_BLOCKED), Int(NGTCP2_ERR_STREAM_SHUT_WR),
                Int(NGTCP2_ERR_STREAM_NOT_FOUND):
                continue
            case 1...:
                return (written, QUICPath(path.pointee), ECN(bits: info.ecn))
            case 0:
                return nil
            default:
                handleWriteError(Int32(written), now: now)
                return nil
            }
        }
    }

    /// `path` is the first member of `ngtcp2_path_storage`; ngtcp2 copies the packet's path into it.
    private var writePath: UnsafeMutablePointer<ngtcp2_path> {
        UnsafeMutableRawPointer(pathStorage).assumingMemoryBound(to: ngtcp2_path.self)
    }

    private func handleWriteError(_ rc: Int32, now: QUICInstant) {
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

    // MARK: - Streams

    /// Opens a stream; throws `streamLimitReached` when the peer's limit is exhausted (wait for
    /// `.streamsAvailable`). Before the handshake this works only when resuming with 0-RTT.
    public func openStream(bidirectional: Bool) throws -> Int64 {
        try ensureOpen()
        var id: Int64 = -1
        let rc = bidirectional ? ngtcp2_conn_open_bidi_stream(conn, &id, nil) : ngtcp2_conn_open_uni_stream(conn, &id, nil)
        switch rc {
        case 0:
            streams[id] = StreamState(id: id)
            return id
        case NGTCP2_ERR_STREAM_ID_BLOCKED:
            throw QUICError.streamLimitReached
        default:
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_open_stream")
        }
    }

    /// Streams the peer still lets us open right now.
    public func streamsLeft(bidirectional: Bool) -> UInt64 {
        guard !isClosed else { return 0 }
        return bidirectional ? ngtcp2_conn_get_streams_bidi_left(conn) : ngtcp2_conn_get_streams_uni_left(conn)
    }

    private func ensureOpen() throws {
        if isClosed { throw QUICError.connectionClosed(closeReason ?? .invalidState("closed")) }
    }

    private func stream(_ id: Int64) throws -> StreamState {
        guard let stream = streams[id] else { throw QUICError.invalidStream(streamID: id, reason: "no such stream (closed or never opened)") }
        return stream
    }

    /// Whether `streamID` was opened by us.
    public func isLocallyInitiated(streamID: Int64) -> Bool {
        (streamID & 1 == 0) == (role == .client)
    }

    /// Whether we can send on `streamID` (bidirectional, or unidirectional opened by us).
    func canSendOn(streamID: Int64) -> Bool {
        streamID & 2 == 0 || isLocallyInitiated(streamID: streamID)
    }

    /// Queues bytes (and optionally FIN) on a stream. The bytes are copied and kept until the peer
    /// acknowledges them. Check `canSend(streamID:)` first to respect the send-buffer bound.
    public func send<Bytes: Collection>(streamID: Int64, bytes: Bytes, fin: Bool = false) throws where Bytes.Element == UInt8 {
        let copy = StreamBytes(copying: bytes)
        try send(streamID: streamID, bytes: copy, range: 0..<copy.count, fin: fin)
    }

    /// Queues `range` of `bytes` (and optionally FIN) without copying; they are kept until the
    /// peer acknowledges them.
    public func send(streamID: Int64, bytes: StreamBytes, range: Range<Int>, fin: Bool = false) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        guard canSendOn(streamID: streamID) else {
            throw QUICError.invalidStream(streamID: streamID, reason: "receive-only unidirectional stream")
        }
        if stream.stoppedByPeer { throw QUICError.streamStopped(streamID: streamID, code: stream.stopSendingCode) }
        guard !stream.send.finQueued, !stream.locallyReset else {
            throw QUICError.invalidStream(streamID: streamID, reason: "already finished or reset for sending")
        }
        stream.send.append(bytes, range: range)
        if fin { stream.send.finQueued = true }
        schedule(stream)
    }

    func schedule(_ stream: StreamState) {
        guard !stream.scheduled, !stream.blocked, stream.send.hasUnsent else { return }
        stream.scheduled = true
        sendSchedule.append(stream)
    }

    /// Below the send-buffer bound (`streamSendBufferLimit`): more bytes may be queued.
    /// When this is false, wait for `.streamWritable(streamID)`.
    public func canSend(streamID: Int64) -> Bool {
        guard let stream = streams[streamID] else { return false }
        let ok = stream.send.unacknowledged < transport.streamSendBufferLimit
        if !ok { stream.wantsWritable = true }
        return ok
    }

    /// Bytes queued on the stream and not yet acknowledged.
    public func unacknowledgedBytes(streamID: Int64) -> Int {
        streams[streamID]?.send.unacknowledged ?? 0
    }

    /// What `read` returns.
    public struct StreamRead: Sendable, Equatable {
        public var bytes: [UInt8]
        /// The peer finished the stream and these are its last bytes.
        public var fin: Bool
        /// Some of the bytes arrived in 0-RTT (replayable) packets.
        public var early: Bool
    }

    /// Reads up to `maxBytes` in order and returns that much flow-control credit to the peer.
    /// Throws `streamReset` once buffered bytes are gone if the peer reset the stream.
    public func read(streamID: Int64, maxBytes: Int = .max) throws -> StreamRead {
        var bytes: [UInt8] = []
        let (fin, early) = try read(streamID: streamID, maxBytes: maxBytes) { bytes.append(contentsOf: $0) }
        return StreamRead(bytes: bytes, fin: fin, early: early)
    }

    /// Like `read(streamID:maxBytes:)`, but hands the bytes to `body` in place (valid only
    /// during the call), one contiguous region at a time, instead of copying them into an array.
    public func read(
        streamID: Int64, maxBytes: Int = .max, into body: (UnsafeRawBufferPointer) -> Void
    ) throws -> (fin: Bool, early: Bool) {
        let stream = try stream(streamID)
        stream.readableSignalled = false
        let before = stream.receive.buffered
        let early = stream.receive.read(max: maxBytes, body)
        let count = before - stream.receive.buffered
        if count > 0 { returnCredit(stream: stream, bytes: count) }
        if count == 0, let code = stream.receive.resetCode {
            // The reset is the stream's last word for the reader.
            stream.receive.finDelivered = true
            retireIfDone(stream)
            throw QUICError.streamReset(streamID: streamID, code: code)
        }
        var fin = false
        if stream.receive.isEmpty && stream.receive.finReceived && !stream.receive.finDelivered {
            stream.receive.finDelivered = true
            fin = true
        }
        if count == 0 && !fin && !stream.receive.finDelivered && isClosed {
            throw QUICError.connectionClosed(closeReason ?? .invalidState("closed"))
        }
        retireIfDone(stream)
        return (fin, early)
    }

    /// Bytes buffered and readable on the stream.
    public func readableBytes(streamID: Int64) -> Int { streams[streamID]?.receive.buffered ?? 0 }

    private func returnCredit(stream: StreamState, bytes: Int) {
        guard !isClosed else { return }
        if !stream.closedByEngine {
            ngtcp2_conn_extend_max_stream_offset(conn, stream.id, UInt64(bytes))
        }
        ngtcp2_conn_extend_max_offset(conn, UInt64(bytes))
    }

    /// Abruptly ends our sending side (RESET_STREAM); the peer's reader gets `code`.
    public func resetStream(streamID: Int64, applicationErrorCode code: UInt64) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        stream.locallyReset = true
        stream.send.discard()
        let rc = ngtcp2_conn_shutdown_stream_write(conn, streamID, code)
        if rc != 0 && rc != NGTCP2_ERR_STREAM_NOT_FOUND {
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_shutdown_stream_write")
        }
        retireIfDone(stream)
    }

    /// Asks the peer to stop sending (STOP_SENDING with `code`) and drops what is buffered.
    public func stopSending(streamID: Int64, applicationErrorCode code: UInt64) throws {
        try ensureOpen()
        let stream = try stream(streamID)
        let dropped = stream.receive.discard()
        if dropped > 0 { returnCredit(stream: stream, bytes: dropped) }
        stream.receive.finDelivered = true
        let rc = ngtcp2_conn_shutdown_stream_read(conn, streamID, code)
        if rc != 0 && rc != NGTCP2_ERR_STREAM_NOT_FOUND {
            throw QUICError.internalError(code: rc, function: "ngtcp2_conn_shutdown_stream_read")
        }
        retireIfDone(stream)
    }

    /// Forgets a stream once ngtcp2 is done with it and the application has read everything.
    func retireIfDone(_ stream: StreamState) {
        let isUnidirectional = stream.id & 2 != 0
        let hasReceiveSide = !isUnidirectional || !isLocallyInitiated(streamID: stream.id)
        let readDone = !hasReceiveSide || (stream.receive.finDelivered && stream.receive.isEmpty)
        // ngtcp2 0.12.1 never closes peer-opened unidirectional streams (fixed upstream in 0.14),
        // so for those the delivered FIN or reset is the end.
        let engineDone = stream.closedByEngine || (isUnidirectional && hasReceiveSide && readDone)
        guard engineDone, readDone else { return }
        stream.scheduled = false
        streams[stream.id] = nil
        returnStreamCredit(stream)
        emit(.streamClosed(streamID: stream.id))
    }

    /// A peer-opened stream is fully consumed: allow the peer one more stream of that kind.
    func returnStreamCredit(_ stream: StreamState) {
        guard !isLocallyInitiated(streamID: stream.id), !stream.creditReturned, !isClosed else { return }
        stream.creditReturned = true
        if stream.id & 2 == 0 {
            ngtcp2_conn_extend_max_streams_bidi(conn, 1)
        } else {
            ngtcp2_conn_extend_max_streams_uni(conn, 1)
        }
    }

    // MARK: - Datagrams

    /// Largest datagram payload that can be sent now (0 if the peer did not enable datagrams).
    public var maxDatagramPayloadSize: Int {
        guard !isClosed, let params = ngtcp2_conn_get_remote_transport_params(conn)?.pointee,
            params.max_datagram_frame_size > 0
        else { return 0 }
        // Frame: type (1) + length varint (up to 4 for our sizes). Packet: short header (1 + DCID
        // up to 20 + packet number up to 4) + AEAD tag (16).
        let frameLimit = Int(min(params.max_datagram_frame_size, 65535)) - 5
        // The current path's packet size, not the configured maximum: until path-MTU
        // discovery raises it, packets are 1,200 bytes and a larger datagram would never fit.
        let packetLimit = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn) - 1 - 20 - 4 - 16 - 5
        return max(0, min(frameLimit, packetLimit))
    }

    /// Queues an unreliable datagram (RFC 9221). Returns its ID for `.datagramAcknowledged` /
    /// `.datagramLost`. Throws `datagramTooLarge` or `datagramsNotSupported` instead of dropping.
    @discardableResult
    public func sendDatagram<Bytes: Collection>(_ bytes: Bytes) throws -> UInt64 where Bytes.Element == UInt8 {
        try ensureOpen()
        let maximum = maxDatagramPayloadSize
        if maximum == 0 {
            if ngtcp2_conn_get_remote_transport_params(conn) == nil {
                throw QUICError.invalidState("datagrams can be sent once the handshake has progressed")
            }
            throw QUICError.datagramsNotSupported
        }
        guard bytes.count <= maximum else { throw QUICError.datagramTooLarge(size: bytes.count, maximum: maximum) }
        let id = nextDatagramID
        nextDatagramID += 1
        // One memcpy when the bytes are contiguous (Data, arrays), not a generic copy loop.
        let copy = bytes.withContiguousStorageIfAvailable { Array($0) } ?? Array(bytes)
        pendingDatagrams.append((id, copy))
        return id
    }

    /// Datagrams queued by `sendDatagram` and not yet written into a packet.
    public var pendingDatagramCount: Int { pendingDatagrams.count }

    // MARK: - Key update and statistics

    /// Starts a TLS key update (RFC 9001 §6). Needs a confirmed handshake; ngtcp2 limits the rate.
    public func initiateKeyUpdate(now: QUICInstant) throws {
        try ensureOpen()
        guard handshakeConfirmed else { throw QUICError.invalidState("key update needs a confirmed handshake") }
        let rc = ngtcp2_conn_initiate_key_update(conn, now.nanoseconds)
        if rc != 0 { throw QUICError.internalError(code: rc, function: "ngtcp2_conn_initiate_key_update") }
    }

    /// Client: moves the connection to `path` now (RFC 9000 §9), typically a new local port or
    /// interface. The peer validates the new path while data keeps flowing; the next packets use
    /// a fresh connection ID, so an observer cannot link the two paths. Packets still arriving
    /// on the old path are dropped by the caller, and lost ones are retransmitted.
    public func migrate(to path: QUICPath, now: QUICInstant) throws {
        try ensureOpen()
        guard role == .client else { throw QUICError.invalidState("only a client can migrate a connection") }
        guard handshakeConfirmed else { throw QUICError.invalidState("migration needs a confirmed handshake") }
        let rc = path.withNgtcp2Path { ngtcp2_conn_initiate_immediate_migration(conn, $0, now.nanoseconds) }
        switch rc {
        case 0: currentTime = now
        case NGTCP2_ERR_CONN_ID_BLOCKED:
            throw QUICError.invalidState("the server has not given us a spare connection ID to migrate with")
        case NGTCP2_ERR_INVALID_STATE:
            throw QUICError.invalidState("the server disabled active migration")
        default: throw QUICError.internalError(code: rc, function: "ngtcp2_conn_initiate_immediate_migration")
        }
    }

    var handshakeConfirmed = false
    /// Streams ngtcp2 dropped when the server refused 0-RTT; reopened after `read_pkt` returns.
    var pendingReopen: [StreamState] = []
    /// The `now` of the latest input, for callbacks that need a timestamp.
    var currentTime = QUICInstant(nanoseconds: 0)

    /// Reopens 0-RTT streams under the same IDs and queues their bytes again from offset 0.
    private func reopenRejectedStreams() {
        guard !pendingReopen.isEmpty, !isClosed else { return }
        let rejected = pendingReopen
        pendingReopen = []
        for old in rejected {
            var id: Int64 = -1
            let rc = old.id & 2 == 0 ? ngtcp2_conn_open_bidi_stream(conn, &id, nil) : ngtcp2_conn_open_uni_stream(conn, &id, nil)
            guard rc == 0, id == old.id else {
                logger.warning("0-RTT stream \(old.id) could not be reopened after rejection (rc \(rc), id \(id))")
                old.receive.resetCode = 0
                old.closedByEngine = true
                streams[old.id] = old
                signalReadable(old)
                continue
            }
            old.send.rewind()
            old.scheduled = false
            old.blocked = false
            streams[id] = old
            schedule(old)
        }
    }

    /// Snapshot of transport counters.
    public var statistics: QUICConnectionStatistics {
        var stat = ngtcp2_conn_stat()
        if !isTerminated { braid_ngtcp2_conn_get_conn_stat(conn, &stat) }
        return QUICConnectionStatistics(
            smoothedRTT: Duration(ngtcp2Duration: stat.smoothed_rtt), minRTT: Duration(ngtcp2Duration: stat.min_rtt),
            latestRTT: Duration(ngtcp2Duration: stat.latest_rtt), congestionWindow: stat.cwnd,
            bytesInFlight: stat.bytes_in_flight, packetsSent: packetsSent, bytesSent: bytesSent,
            packetsReceived: packetsReceived, bytesReceived: bytesReceived, datagramsLost: datagramsLost,
            transmits: transmitsWritten)
    }
}

/// Transport counters of one connection.
public struct QUICConnectionStatistics: Sendable, Hashable {
    public var smoothedRTT: Duration
    public var minRTT: Duration
    public var latestRTT: Duration
    public var congestionWindow: UInt64
    public var bytesInFlight: UInt64
    /// UDP datagrams and bytes handed out by `writeTransmits` / taken in by `receive`.
    public var packetsSent: UInt64
    public var bytesSent: UInt64
    public var packetsReceived: UInt64
    public var bytesReceived: UInt64
    /// RFC 9221 datagrams declared lost.
    public var datagramsLost: UInt64
    /// Batches (potential GSO sends) written.
    public var transmits: UInt64
}

extension QUICPath {
    init(_ path: ngtcp2_path) {
        self.init(
            local: QUICAddress(path.local.addr, length: Int(path.local.addrlen)) ?? QUICAddress.unspecified,
            remote: QUICAddress(path.remote.addr, length: Int(path.remote.addrlen)) ?? QUICAddress.unspecified)
    }

    /// Calls `body` with an `ngtcp2_path` pointing at copies of both addresses.
    func withNgtcp2Path<R>(_ body: (UnsafePointer<ngtcp2_path>) -> R) -> R {
        local.withSockAddr { localAddr, localLength in
            remote.withSockAddr { remoteAddr, remoteLength in
                var path = ngtcp2_path(
                    local: ngtcp2_addr(addr: UnsafeMutablePointer(mutating: localAddr), addrlen: ngtcp2_socklen(localLength)),
                    remote: ngtcp2_addr(addr: UnsafeMutablePointer(mutating: remoteAddr), addrlen: ngtcp2_socklen(remoteLength)),
                    user_data: nil)
                return body(&path)
            }
        }
    }
}
