#if canImport(Glibc)
import Glibc
#endif
import BraidCore
import BraidTLS
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
/// try client.send(streamID: id, bytes: Array("hello".utf8), fin: true)
/// ```
package final class QUICConnection {
    package enum Role: Sendable { case client, server }

    enum Phase {
        case handshaking
        case established
        case closing(deadline: QUICInstant)
        case draining(deadline: QUICInstant)
        case terminated
    }

    package let role: Role
    /// Set once in `init` (ngtcp2 needs `self` as callback context before it can exist).
    private(set) var conn: OpaquePointer!
    /// Nil once released after the handshake (`releaseTLSSessionWhenDone`).
    var session: gnutls_session_t!
    private let connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>
    let transport: QUICTransportConfiguration
    let staticSecret: [UInt8]
    package var logger: Logger
    private var qlogFile: UnsafeMutablePointer<FILE>?

    var phase: Phase = .handshaking
    // Per-packet state below skips the run-time exclusivity check (a runtime call on every
    // access, several per packet): the engine is used by one thread at a time and none of it
    // is held across a call that could reach it again.
    @exclusivity(unchecked) var events = Deque<QUICEvent>()
    /// The `now` of the latest input, for callbacks that need a timestamp.
    var currentTime = QUICInstant(nanoseconds: 0)
    /// A server connection's first packet: the Initial its endpoint made it for (after a
    /// Retry, the Initial that brought the token back). Set by the endpoint.
    package var firstPacketTime: QUICInstant?
    /// When the handshake completed (the `now` of the input that completed it).
    package internal(set) var handshakeCompletedTime: QUICInstant?

    // Stored state of each subsystem; the logic is in `QUICConnection+<subsystem>.swift`.

    // MARK: Closing (+Close)
    /// Why the connection ended; set when it starts closing or draining.
    package internal(set) var closeReason: QUICError?
    /// Our CONNECTION_CLOSE while closing, and when to send it again.
    var closePacket = ClosePacketCache()
    /// Set by the `recv_stateless_reset` callback: ngtcp2 then drains without a close reason.
    var receivedStatelessReset = false
    /// The ALPNs we offered (client) or accept (server), for `alpnMismatch` errors.
    var offeredALPNForErrors: [String] = []

    // MARK: Streams (+Streams)
    // Stream state skips the run-time exclusivity check, as the per-packet state above does.
    @exclusivity(unchecked) var streams: [Int64: StreamState] = [:]
    /// Peer-opened streams that closed while their owner held their credit: the peer may
    /// open one more stream for each once the owner releases it.
    @exclusivity(unchecked) var heldStreamCredit: Set<Int64> = []
    /// Peer-opened unidirectional streams whose credit went back (consumed, and released if
    /// held), and how many more the peer was allowed for them: both bounded by
    /// `transport.peerUnidirectionalStreamLimit`.
    @exclusivity(unchecked) var peerUnidirectionalStreamsEnded: UInt64 = 0
    @exclusivity(unchecked) var peerUnidirectionalStreamsExtended: UInt64 = 0
    /// The peer consumed its last unidirectional stream inside `read_pkt` (a callback retired
    /// it), where no close may be written: the connection closes once `read_pkt` returns.
    @exclusivity(unchecked) var unidirectionalStreamsSpentInRead = false
    /// `read_pkt` is running: its callbacks must not call back into ngtcp2's write side.
    @exclusivity(unchecked) var readingPacket = false
    /// Gives each stream the peer opens its sink (nil: the engine buffers its bytes), before
    /// its first bytes arrive. Called inside the engine's receive, so it must not call the
    /// engine.
    package var makeStreamSink: ((Int64) -> (any QUICStreamSink)?)?
    /// The bytes the connection's owner holds outside the engine for it (queued sends, received
    /// bytes and datagrams not yet read), counted in `heldBytes`; nil: none.
    package var ownerHeldBytes: (() -> Int)?
    /// Streams with bytes to send, in round-robin order; an entry whose `scheduled` is false has
    /// left the schedule and is dropped when reached.
    @exclusivity(unchecked) var sendSchedule = Deque<StreamState>()
    /// Stream bytes the stream at the front of `sendSchedule` has put in packets this turn.
    @exclusivity(unchecked) var sendTurnBytes = 0
    /// How many it may put in before the next stream's turn (`streamTurnLimit()`, taken when
    /// the turn starts).
    @exclusivity(unchecked) var sendTurnLimit = 0
    /// The most bytes a stream sends in one turn. Handing the turn on after every packet spread
    /// each receive batch over all busy streams, so a receiver woke each reader for about one
    /// packet's bytes: 64 streams moved 0.56x the bytes one stream did.
    static let streamSendQuantum = 64 * 1024
    /// Streams ngtcp2 dropped when the server refused 0-RTT; reopened after `read_pkt` returns.
    @exclusivity(unchecked) var pendingReopen: [StreamState] = []
    /// Stream bytes held across all streams, bounded by `connectionSendBufferLimit`.
    @exclusivity(unchecked) var sendBudget: SendBudget<StreamState>
    /// Stream bytes the engine let go of so far, all streams: sent bytes acknowledged or
    /// discarded, and received bytes the owner read. Grows as fast as the peer takes what is
    /// sent and the application reads (a listener's buffer limit tells a stalled connection by
    /// it); bytes arriving from the peer do not count.
    @exclusivity(unchecked) package internal(set) var drainedStreamBytes: UInt64 = 0
    /// The receive windows as granted (+ReceiveWindows).
    var receiveWindows: ReceiveWindowLedger

    // MARK: Datagrams (+Datagrams)
    /// Datagrams queued by `sendDatagram`, not yet in a packet (held as the sender gave them).
    @exclusivity(unchecked) var pendingDatagrams = Deque<PendingDatagram>()
    /// Takes received datagrams in place of `datagramReceived` events (nil: events).
    package var datagramSink: (any QUICDatagramSink)?
    /// A `datagramsReceived` event is queued and not yet polled: datagrams the sink takes
    /// meanwhile ride on it.
    @exclusivity(unchecked) var datagramsReceivedPending = false
    /// Each datagram's acknowledgement or loss is an event of its own, with its ID (the
    /// default); off, they are one `datagramsSettled` until polled, for an owner that only
    /// needs to know that the queue moved.
    package var reportsEachDatagramOutcome = true
    /// A `datagramsSettled` event is queued and not yet polled.
    @exclusivity(unchecked) var datagramsSettledPending = false
    /// The most datagrams `pendingDatagrams` has held at once (see `largestPendingDatagramCount`).
    @exclusivity(unchecked) var pendingDatagramHighWater = 0
    /// The ID the next queued datagram gets (its acknowledged/lost events carry it).
    var nextDatagramID: UInt64 = 0
    /// Keeps datagram-only flights from stalling on ngtcp2 0.12.1.
    @exclusivity(unchecked) var datagramProbe: DatagramProbe

    // MARK: Packet assembly (+PacketAssembly)
    /// Where a packet that could not join its batch waits for the next one. Allocated the
    /// first time a packet is held: most connections never need it, and an idle connection
    /// should not carry packet-sized buffers.
    var heldPacketStorage: UnsafeMutableRawBufferPointer?
    /// A whole batch, for `writeTransmits(_:)` callers that give no memory of their own (tests,
    /// engine benchmarks); the datapath writes into its socket's memory and never allocates it.
    var batchStorage: UnsafeMutableRawBufferPointer?
    let maxPacketSize: Int
    /// Most packets per batch: what one GSO send may carry.
    package static let maxSegmentsPerBatch = UDPSegmentation.maxSegments
    /// Largest batch in bytes: the UDP payload limit of one IPv4 datagram (65535 - 20 - 8).
    package static let maxBatchBytes = UDPSegmentation.maxBytes
    /// A packet written but not yet emitted because it could not join the previous batch.
    var heldPacket: (length: Int, path: QUICPath, ecn: ECN)?
    /// Stream-data scatter list handed to ngtcp2 (reused: no allocation per packet).
    let vecs: UnsafeMutableBufferPointer<ngtcp2_vec>
    static let maxVecs = 16
    /// Where ngtcp2 writes the path of the packet it writes.
    let pathStorage: UnsafeMutablePointer<ngtcp2_path_storage>

    // MARK: TLS (+TLS)
    let verification: QUICCertificateVerification?
    /// The name we verify the server certificate against (client) / "" (server).
    package let serverName: String
    var certificateProblem: CertificateProblem?
    /// Client: we resume and may send 0-RTT data (streams open before the handshake completes).
    package internal(set) var attemptedEarlyData = false
    /// The handshake resumed an earlier session with a ticket (no certificate exchanged); set
    /// when the handshake completes, which on the server is a flight after the client.
    package internal(set) var isResumed = false
    /// Client: HANDSHAKE_DONE arrived (key updates and migration need it).
    var handshakeConfirmed = false
    /// The ALPN both sides agreed on, once the handshake completed.
    package internal(set) var negotiatedALPN: String?
    /// Client: the server accepted our 0-RTT data. Server: this connection received 0-RTT data.
    package internal(set) var earlyDataAccepted = false
    /// Client: the last ticket handed out, and the NEW_TOKEN token that goes into it.
    var latestTicket: QUICResumptionTicket?
    /// When the NewSessionTicket being processed arrived, and its lifetime.
    var arrivingTicketValidity: TLSTicketValidity?
    var receivedToken: [UInt8] = []
    /// Server: makes the NEW_TOKEN token for a client's address (nil: no token).
    var makeNewToken: ((QUICAddress, QUICInstant) -> [UInt8]?)?
    /// TLS material the session points into (credentials, ticket key): must outlive `session`.
    var tlsResources: AnyObject?

    // MARK: Statistics (+Statistics)
    /// What went in and out, for `statistics`.
    @exclusivity(unchecked) var counters = TrafficCounters()
    /// Count probe timeouts (`QUICConnectionStatistics.probeTimeouts`): two reads of ngtcp2's
    /// statistics per timer expiry, so only when the owner reports them.
    package var countsProbeTimeouts = false

    // MARK: Server routing
    /// Server: changes the endpoint's routing table must follow, oldest first, until the endpoint
    /// applies them (`QUICServerEndpoint.applyRoutingChanges(of:)`). Empty in steady state.
    @exclusivity(unchecked) var routingChanges: [QUICRoutingChange] = []
    /// Server: issues the connection IDs we hand the peer (the endpoint's format and loop tag).
    var connectionIDGenerator: ConnectionIDGenerator?
    /// Server: the fleet's keys; connection IDs issued later take the minting generation's
    /// stateless-reset secret (`staticSecret` otherwise).
    var serverKeyRing: ServerKeyRing?
    /// Server: this connection was created by the datagram just passed to the endpoint.
    @exclusivity(unchecked) package internal(set) var isNewlyAccepted = false

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
        logger = BraidLog.logger(label: "braid.quic")
        logger[metadataKey: "quic.cid"] = "\(setup.sourceCID)"
        maxPacketSize = max(transport.maxUDPPayloadSize, 1200)
        datagramProbe = DatagramProbe(configuredKeepAlive: transport.keepAliveInterval?.nanosecondsClamped ?? 0)
        sendBudget = .streams(limit: transport.connectionSendBufferLimit)
        receiveWindows = ReceiveWindowLedger(
            initial: .init(
                connection: setup.params.initial_max_data, bidirectionalLocal: setup.params.initial_max_stream_data_bidi_local,
                bidirectionalRemote: setup.params.initial_max_stream_data_bidi_remote,
                unidirectional: setup.params.initial_max_stream_data_uni),
            tunes: transport.tunesReceiveWindows, maxConnectionWindow: transport.maxConnectionWindow,
            maxStreamWindow: transport.maxStreamWindow)
        connRef = .allocate(capacity: 1)
        pathStorage = .allocate(capacity: 1)
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
        if transport.keepAliveInterval != nil {
            ngtcp2_conn_set_keep_alive_timeout(conn, datagramProbe.configuredKeepAlive)
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
        heldPacketStorage?.deallocate()
        batchStorage?.deallocate()
        vecs.deallocate()
    }

    deinit { releaseResources() }

    // MARK: - State

    /// The handshake completed and the connection is not closing.
    package var isEstablished: Bool { if case .established = phase { true } else { false } }

    /// All state is gone; the owner can drop the connection.
    package var isTerminated: Bool { if case .terminated = phase { true } else { false } }

    /// Closing or draining: application calls fail with `connectionClosed`.
    package var isClosed: Bool {
        switch phase {
        case .handshaking, .established: false
        case .closing, .draining, .terminated: true
        }
    }

    /// The path the connection currently uses.
    package var path: QUICPath {
        QUICPath(ngtcp2_conn_get_path(conn).pointee)
    }

    /// Next event, if any.
    package func pollEvent() -> QUICEvent? {
        let event = events.popFirst()
        switch event {
        case .datagramsReceived: datagramsReceivedPending = false
        case .datagramsSettled: datagramsSettledPending = false
        default: break
        }
        return event
    }

    func emit(_ event: QUICEvent) { events.append(event) }

    /// When `handleTimeout` must be called next, or nil if no timer is needed.
    package var nextDeadline: QUICInstant? {
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
    package func receive(datagram: UnsafeRawBufferPointer, path: QUICPath, ecn: ECN, now: QUICInstant) {
        switch phase {
        case .terminated, .draining:
            return
        case .closing:
            // RFC 9000 §10.2.1: answer with the cached CONNECTION_CLOSE, but less and less often.
            closePacket.packetArrived()
            return
        case .handshaking, .established:
            break
        }
        // An empty datagram carries no packet (read_pkt would call it an invalid argument).
        guard datagram.count > 0 else { return }
        currentTime = now
        datagramProbe.noteActivity(at: now)
        counters.received(bytes: datagram.count)
        var info = ngtcp2_pkt_info(ecn: UInt32(ecn.rawValue))
        readingPacket = true
        let rc = path.withNgtcp2Path { ngPath in
            braid_ngtcp2_conn_read_pkt(
                conn, ngPath, &info, datagram.baseAddress?.assumingMemoryBound(to: UInt8.self), datagram.count,
                now.nanoseconds)
        }
        readingPacket = false
        if rc != 0 { handleReadError(rc, now: now) }
        if unidirectionalStreamsSpentInRead { closeIfUnidirectionalStreamsSpent() }
        reopenRejectedStreams()
        releaseTLSSessionWhenDone()
        updateDatagramProbe()
    }

    package func receive(datagram: [UInt8], path: QUICPath, ecn: ECN = .notECT, now: QUICInstant) {
        datagram.withUnsafeBytes { receive(datagram: $0, path: path, ecn: ecn, now: now) }
    }

    /// Call when `nextDeadline` has passed.
    package func handleTimeout(now: QUICInstant) {
        switch phase {
        case .terminated:
            return
        case .closing(let deadline), .draining(let deadline):
            if now >= deadline { terminate(reason: closeReason ?? .idleTimeout) }
            return
        case .handshaking, .established:
            break
        }
        datagramProbe.timerFired(at: now)
        // ngtcp2 0.12 counts no lost packets; the probe timeouts it runs are read here, around
        // the expiry that runs them, and only for an owner that asked.
        let probesBefore = countsProbeTimeouts ? probeTimeoutCount : 0
        let rc = ngtcp2_conn_handle_expiry(conn, now.nanoseconds)
        if countsProbeTimeouts, rc == 0 {
            let probesAfter = probeTimeoutCount
            // ngtcp2 resets its count once an acknowledgement arrives: only a rise is a timeout.
            if probesAfter > probesBefore { counters.probeTimedOut(probesAfter - probesBefore) }
        }
        switch rc {
        case 0:
            return
        case NGTCP2_ERR_IDLE_CLOSE:
            // RFC 9000 §10.1: an idle connection is discarded silently.
            terminate(reason: .idleTimeout)
        case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
            terminate(reason: .handshakeTimeout)
        default:
            closeOnLibraryError(rc, now: now)
        }
    }

    // MARK: - Server routing

    /// Server: notes a change for the endpoint's routing table. A client routes nothing, so it
    /// keeps no record.
    func recordRoutingChange(_ change: QUICRoutingChange) {
        if role == .server { routingChanges.append(change) }
    }
}
