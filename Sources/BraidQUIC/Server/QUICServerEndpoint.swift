#if canImport(Glibc)
import Glibc
#endif
import BraidCore
import BraidTLS
import CBraid
import DequeModule
import Logging
import Synchronization

/// A server: one UDP socket's worth of QUIC. Routes each datagram to its connection by
/// destination connection ID, creates connections for new clients, and answers what belongs to
/// no connection: Version Negotiation, Retry (address validation), stateless resets, refusals.
///
/// Sans-IO like `QUICConnection`: the owner passes datagrams in with `receive`, writes the
/// returned connection's packets, and sends `pollEndpointTransmits()` for the endpoint's own.
/// After driving a connection any other way (timers, writes, application calls) it calls
/// `applyRoutingChanges(of:)`, so the routing table follows the connection's IDs and its end.
/// After each batch of datagrams it also writes `pollEvictedConnections()`: idle connections
/// the endpoint closed to make room for a new client (see `QUICServerConfiguration`'s limits).
///
/// ```swift
/// let endpoint = try QUICServerEndpoint(configuration: .init(
///     alpn: ["echo"], certificateChainFile: "cert.pem", privateKeyFile: "key.pem"))
/// if let connection = endpoint.receive(datagram: bytes, path: path, ecn: .notECT, now: now) {
///     for transmit in connection.pollTransmits(now: now) { send(transmit) }
///     endpoint.applyRoutingChanges(of: connection)
/// }
/// for transmit in endpoint.pollEndpointTransmits() { send(transmit) }
/// ```
package final class QUICServerEndpoint {
    package let configuration: QUICServerConfiguration
    /// The transport of the endpoint's connections: the configuration's, with a listener's
    /// receive windows (`QUICTransportConfiguration.forListenerConnections()`).
    let connectionTransport: QUICTransportConfiguration
    /// Length of the IDs of the default `.random` connection-ID format.
    package static let connectionIDLength = 16
    /// Issues this endpoint's connection IDs, all of one length (so short headers can be
    /// parsed) in the configuration's `connectionIDFormat`, with `connectionIDTag`.
    package let connectionIDs: ConnectionIDGenerator
    /// Secrets shared with the other endpoints serving the same address.
    package let keys: QUICServerKeys
    /// First byte of every connection ID this endpoint issues, so that a kernel filter can
    /// steer each short-header packet to this endpoint's socket (see `QUICServerGroup`).
    package let connectionIDTag: UInt8?
    /// TLS material every server session points into; each connection retains it too.
    private let tls: ServerTLSContext
    var logger = BraidLog.logger(label: "braid.quic.server")

    /// Read for every datagram, by the endpoint's one thread, and never held across a call
    /// that could reach it again: the run-time exclusivity check is left out.
    @exclusivity(unchecked) private var routes: [ConnectionID: QUICConnection] = [:]
    /// The route the last datagram took: a connection's datagrams come in runs under one ID,
    /// and comparing the ID costs less than hashing it. Cleared whenever that ID's route
    /// changes or goes.
    @exclusivity(unchecked) private var lastRoute: (id: ConnectionID, connection: QUICConnection)?
    /// Every live connection: its routed IDs and what the limits count it as.
    private var admitted: [ObjectIdentifier: Admission] = [:]
    /// Connections per client IP address (port 0), counting those whose address is proven.
    private var perAddress: [SocketAddress: Int] = [:]
    /// Live connections whose handshake has not completed.
    private var halfOpen = 0
    /// Connections evicted (closing, not yet terminated): they no longer take a place.
    private var evicting = 0
    /// Connections evicted since `pollEvictedConnections()` was last called, for the owner to write.
    private var evictedSinceLastPoll: [QUICConnection] = []
    private var outgoing = Deque<Transmit>()
    /// Stateless resets sent in the current one-second window (they are rate limited).
    private var resetWindow: (start: QUICInstant, count: Int) = (QUICInstant(nanoseconds: 0), 0)
    static let maxResetsPerSecond = 100

    /// What the endpoint keeps about one live connection.
    private struct Admission {
        let connection: QUICConnection
        var ids: Set<ConnectionID> = []
        /// The client's IP address, port 0 (the key of `perAddress`).
        let address: SocketAddress
        var isHalfOpen = true
        /// Counted in `perAddress` (its address is proven).
        var countsForAddress: Bool
        var isEvicted = false
    }

    /// Live connections: a connection stops counting once its termination is applied (by
    /// `receive` or `applyRoutingChanges(of:)`).
    package var connectionCount: Int { admitted.count }

    /// Live connections whose handshake has not completed.
    package var halfOpenCount: Int { halfOpen }

    /// Whether a client without a token gets a Retry now (`.always`, or `.automatic` under load).
    package var isRetryActive: Bool {
        switch configuration.retry {
        case .never: false
        case .always: true
        case .automatic: halfOpen >= configuration.retryThreshold || isFull
        }
    }

    /// False once the owner stops taking clients (a listener shutting down): every new client
    /// is then refused with CONNECTION_REFUSED, "server shutting down: not accepting new
    /// connections"; connections already accepted carry on.
    package var isAcceptingNewConnections = true

    /// True while the listener's connections buffer more than its limit allows (set by the
    /// owner, which measures them): every new client is refused with CONNECTION_REFUSED,
    /// `bufferLimitReason`.
    package var isOverBufferLimit = false
    /// Why clients are refused while `isOverBufferLimit`.
    package static let bufferLimitReason = "server busy: buffer limit reached"

    /// Every place in the connection table is taken (evicted connections no longer count).
    private var isFull: Bool { admitted.count - evicting >= configuration.maxConnections }

    /// Connection IDs routed to a connection now (tests check that a connection's go with it).
    var routeCount: Int { routes.count }
    /// Whether the endpoint counts `connection`'s client address as proven (a valid token, or
    /// a completed handshake): only then may it be sent more than 3x what it sent (tests).
    func isAddressProven(of connection: QUICConnection) -> Bool {
        admitted[ObjectIdentifier(connection)]?.countsForAddress ?? false
    }
    /// The places the endpoint's tables hold (tests check they do not grow round after round).
    var tableCapacity: Int { routes.capacity + admitted.capacity + perAddress.capacity }

    /// Counters of what the endpoint answered itself.
    package private(set) var versionNegotiationsSent = 0
    package private(set) var retriesSent = 0
    package private(set) var statelessResetsSent = 0
    package private(set) var refusedConnections = 0
    package private(set) var evictedConnections = 0
    package private(set) var droppedDatagrams = 0
    /// Short-header packets for an unknown connection whose ID carries another server's ID
    /// (dropped without a stateless reset; counted in `droppedDatagrams` too).
    package private(set) var strangersDropped = 0

    /// Live counts and counters: connections, half-open handshakes, streams and buffered bytes
    /// (summed over the connections, so call it for a snapshot, not per packet).
    package var statistics: QUICServerStatistics {
        var streams = 0
        var buffered = 0
        for admission in admitted.values {
            streams += admission.connection.streamCount
            buffered += admission.connection.bufferedBytes
        }
        return QUICServerStatistics(
            connections: admitted.count, halfOpenConnections: halfOpen, streams: streams, bufferedBytes: buffered,
            isRetryActive: isRetryActive, retriesSent: retriesSent, refusedConnections: refusedConnections,
            evictedConnections: evictedConnections, statelessResetsSent: statelessResetsSent,
            versionNegotiationsSent: versionNegotiationsSent, droppedDatagrams: droppedDatagrams)
    }

    /// Connections the endpoint closed by itself since the last call (idle ones evicted to make
    /// room): the owner writes their CONNECTION_CLOSE and delivers their events, as after
    /// driving them.
    package func pollEvictedConnections() -> [QUICConnection] {
        guard !evictedSinceLastPoll.isEmpty else { return [] }
        defer { evictedSinceLastPoll.removeAll() }
        return evictedSinceLastPoll
    }

    /// - Parameters:
    ///   - keys: secrets shared by every endpoint of one server; nil makes new ones from
    ///     `configuration.staticSecret`.
    ///   - connectionIDTag: when set, the first byte of every connection ID this endpoint issues.
    package convenience init(configuration: QUICServerConfiguration, keys: QUICServerKeys? = nil, connectionIDTag: UInt8? = nil) throws {
        try Self.validate(configuration)
        let credentials = try mappingTLSErrors {
            try TLSCredentials.server(
                certificateChainFile: configuration.certificateChainFile, privateKeyFile: configuration.privateKeyFile,
                identity: configuration.identityMaterial)
        }
        try self.init(configuration: configuration, keys: keys, connectionIDTag: connectionIDTag, credentials: credentials)
    }

    /// An endpoint whose sessions use `credentials` already loaded from the configuration's
    /// files (the fuzzer makes an endpoint per input, and parsing the PEM files would dominate).
    init(configuration: QUICServerConfiguration, keys: QUICServerKeys? = nil, connectionIDTag: UInt8? = nil, credentials: TLSCredentials) throws {
        try Self.validate(configuration)
        self.configuration = configuration
        connectionTransport = configuration.transport.forListenerConnections()
        self.keys = try keys ?? QUICServerKeys(for: configuration)
        self.connectionIDTag = connectionIDTag
        connectionIDs = try ConnectionIDGenerator(format: configuration.connectionIDFormat, loopTag: connectionIDTag)
        let keys = self.keys
        tls = try mappingTLSErrors { try ServerTLSContext(credentials: credentials, keys: keys) }
    }

    private static func validate(_ configuration: QUICServerConfiguration) throws {
        guard !configuration.alpn.isEmpty else { throw QUICError.configuration("QUIC needs at least one ALPN") }
        try configuration.transport.validate()
        if let lifetime = configuration.ticketLifetime {
            // GnuTLS divides by the lifetime to step its ticket keys.
            guard lifetime >= 1 else { throw QUICError.configuration("ticketLifetime must be at least 1 second") }
            guard configuration.keyRing == nil else { throw QUICError.configuration("ticketLifetime cannot be set with a fleet's key ring") }
        }
    }

    /// Packets the endpoint itself wants sent (Version Negotiation, Retry, resets, refusals).
    package func pollEndpointTransmits() -> [Transmit] {
        defer { outgoing.removeAll() }
        return Array(outgoing)
    }

    /// Routes one datagram. Returns the connection it belongs to (possibly just created: check
    /// `isNew` via `connection.isNewlyAccepted`), or nil if the endpoint handled or dropped it.
    @discardableResult
    package func receive(datagram: UnsafeRawBufferPointer, path: QUICPath, ecn: ECN, now: QUICInstant) -> QUICConnection? {
        guard let base = datagram.baseAddress?.assumingMemoryBound(to: UInt8.self), datagram.count > 0 else { return nil }
        var vc = ngtcp2_version_cid()
        let rc = ngtcp2_pkt_decode_version_cid(&vc, base, datagram.count, connectionIDs.length)
        if rc == NGTCP2_ERR_VERSION_NEGOTIATION {
            sendVersionNegotiation(vc, datagramLength: datagram.count, path: path)
            return nil
        }
        guard rc == 0, vc.dcidlen <= 20, let dcidPointer = vc.dcid else {
            droppedDatagrams += 1
            return nil
        }
        let dcid = ConnectionID(pointer: dcidPointer, count: vc.dcidlen)
        let routed: QUICConnection?
        if let last = lastRoute, last.id == dcid {
            routed = last.connection
        } else {
            routed = routes[dcid]
            if let routed { lastRoute = (dcid, routed) }
        }
        if let connection = routed {
            connection.isNewlyAccepted = false
            connection.receive(datagram: datagram, path: path, ecn: ecn, now: now)
            // IDs issued while reading this datagram are routed before the next one is.
            applyRoutingChanges(of: connection)
            return connection
        }
        if vc.version == 0 {
            // Short header for a connection we do not know: tell the peer with a stateless
            // reset, but only when the ID says we issued it. Behind a load balancer a packet
            // for another server (misrouted, or replayed by an attacker) must not reset that
            // server's connection; it is dropped.
            if let ours = connectionIDs.ownServerID, connectionIDs.serverID(in: dcid.bytes) != ours {
                strangersDropped += 1
                droppedDatagrams += 1
                return nil
            }
            sendStatelessReset(for: dcid, triggerLength: datagram.count, path: path, now: now)
            return nil
        }
        return accept(datagram: datagram, base: base, path: path, ecn: ecn, now: now)
    }

    package func receive(datagram: [UInt8], path: QUICPath, ecn: ECN = .notECT, now: QUICInstant) -> QUICConnection? {
        datagram.withUnsafeBytes { receive(datagram: $0, path: path, ecn: ecn, now: now) }
    }

    private func accept(
        datagram: UnsafeRawBufferPointer, base: UnsafePointer<UInt8>, path: QUICPath, ecn: ECN, now: QUICInstant
    ) -> QUICConnection? {
        var header = ngtcp2_pkt_hd()
        guard ngtcp2_accept(&header, base, datagram.count) == 0 else {
            // Not an Initial that can start a connection (at 0.12.1 this includes 0-RTT that
            // overtook its Initial); the client will retransmit.
            droppedDatagrams += 1
            return nil
        }
        guard isAcceptingNewConnections else {
            // Before Retry: a client that would be refused anyway costs no round trip.
            refuse(header, reason: Self.shuttingDownReason, path: path)
            return nil
        }
        if isOverBufferLimit {
            refuse(header, reason: Self.bufferLimitReason, path: path)
            return nil
        }
        let address = Self.clientKey(path.remote)
        if configuration.maxConnectionsPerAddress > 0, let count = perAddress[address],
            count >= configuration.maxConnectionsPerAddress
        {
            refuse(header, reason: "server busy: too many connections from this address", path: path)
            return nil
        }
        var originalDCID: ngtcp2_cid?
        var validatedToken = false
        let token = UnsafeBufferPointer(start: header.token.base, count: header.token.len)
        if let magic = token.first {
            // Any generation of the fleet's keys still accepted may have minted it.
            let generations = keys.ring.accepted(at: now)
            if magic == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
                var odcid = ngtcp2_cid()
                let ok = generations.contains { generation in
                    generation.tokenSecret.withUnsafeBufferPointer { secret in
                        path.remote.withSockAddr { address, length in
                            ngtcp2_crypto_verify_retry_token(
                                &odcid, token.baseAddress, token.count, secret.baseAddress, secret.count, header.version,
                                address, ngtcp2_socklen(length), &header.dcid, configuration.retryTokenLifetime.nanosecondsClamped,
                                now.nanoseconds) == 0
                        }
                    }
                }
                guard ok else {
                    sendStatelessClose(header, errorCode: UInt64(NGTCP2_INVALID_TOKEN), path: path)
                    return nil
                }
                originalDCID = odcid
                validatedToken = true
            } else if magic == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR) {
                validatedToken = generations.contains { generation in
                    generation.tokenSecret.withUnsafeBufferPointer { secret in
                        path.remote.withSockAddr { address, length in
                            ngtcp2_crypto_verify_regular_token(
                                token.baseAddress, token.count, secret.baseAddress, secret.count, address,
                                ngtcp2_socklen(length), configuration.tokenLifetime.nanosecondsClamped, now.nanoseconds) == 0
                        }
                    }
                }
            }
        }
        if isRetryActive && !validatedToken {
            // Address validation first: an Initial from a spoofed address never comes back, so it
            // costs a Retry packet and no state.
            sendRetry(header, datagramLength: datagram.count, path: path, now: now)
            return nil
        }
        if halfOpen >= configuration.maxHalfOpenConnections {
            refuse(header, reason: "server busy: too many handshakes in progress", path: path)
            return nil
        }
        if isFull {
            guard let idle = longestIdleConnection() else {
                refuse(header, reason: "server busy: connection limit reached", path: path)
                return nil
            }
            evict(idle, now: now)
        }

        let transport = connectionTransport
        var settings = transport.ngtcp2Settings(now: now)
        if validatedToken { settings.token = header.token }
        var params = transport.ngtcp2TransportParameters()
        let sourceCID = connectionIDs.nextWithRandomNonce { routes[$0] != nil }
        if let originalDCID {
            params.original_dcid = originalDCID
            params.retry_scid = header.dcid
            params.retry_scid_present = 1
        } else {
            params.original_dcid = header.dcid
        }
        var scid = sourceCID.ngtcp2
        let minting = keys.ring.current
        let tokenOK = minting.resetSecret.withUnsafeBufferPointer {
            ngtcp2_crypto_generate_stateless_reset_token(&params.stateless_reset_token.0, $0.baseAddress, $0.count, &scid)
        }
        guard tokenOK == 0 else { return nil }
        params.stateless_reset_token_present = 1
        let setup = QUICConnection.Setup(
            role: .server, path: path, version: header.version, destinationCID: ConnectionID(header.scid),
            sourceCID: sourceCID, settings: settings, params: params, qlogODCID: ConnectionID(params.original_dcid))
        let connection: QUICConnection
        do {
            connection = try QUICConnection(
                setup: setup, transport: transport, staticSecret: minting.resetSecret, verification: nil, serverName: ""
            ) { connection, connRef in try self.tls.makeSession(configuration: self.configuration, connRef: connRef) }
        } catch {
            logger.warning("cannot accept connection from \(path.remote): \(error)")
            droppedDatagrams += 1
            return nil
        }
        connection.tlsResources = tls
        connection.connectionIDGenerator = connectionIDs
        connection.serverKeyRing = keys.ring
        connection.currentTime = now
        connection.firstPacketTime = now
        connection.offeredALPNForErrors = configuration.alpn
        connection.isNewlyAccepted = true
        let ring = keys.ring
        let lifetimeOK = configuration.tokenLifetime > .zero
        connection.makeNewToken = { remote, now in
            guard lifetimeOK else { return nil }
            var token = [UInt8](repeating: 0, count: braid_ngtcp2_crypto_max_regular_tokenlen())
            let length = ring.current.tokenSecret.withUnsafeBufferPointer { secret in
                remote.withSockAddr { address, addressLength in
                    ngtcp2_crypto_generate_regular_token(
                        &token, secret.baseAddress, secret.count, address, ngtcp2_socklen(addressLength), now.nanoseconds)
                }
            }
            return length > 0 ? Array(token.prefix(length)) : nil
        }
        connection.receive(datagram: datagram, path: path, ecn: ecn, now: now)
        if connection.isTerminated {
            droppedDatagrams += 1
            return nil
        }
        admit(connection, address: address, addressProven: validatedToken)
        route(ConnectionID(header.dcid), to: connection)
        route(sourceCID, to: connection)
        applyRoutingChanges(of: connection)
        return connection
    }

    // MARK: Routing table

    /// Applies the routing changes `connection` recorded since the last call: connection IDs it
    /// issued or retired, and its termination, which drops all its routes and takes it out of
    /// `connectionCount`. `receive` does this for the connection a datagram went to; call it
    /// after driving one of this endpoint's connections any other way (`handleTimeout`,
    /// `writeTransmits`, `close` and other application calls), before the next `receive`.
    /// Cheap when nothing changed. A connection this endpoint does not route is left untouched.
    package func applyRoutingChanges(of connection: QUICConnection) {
        let key = ObjectIdentifier(connection)
        guard !connection.routingChanges.isEmpty, admitted[key] != nil else { return }
        var terminated = false
        for change in connection.routingChanges {
            switch change {
            case .issued(let id): route(id, to: connection)
            case .retired(let id): unroute(id, of: connection)
            case .handshakeCompleted: handshakeCompleted(key)
            case .terminated: terminated = true
            }
        }
        // Keeping the capacity: the next change needs no allocation either.
        connection.routingChanges.removeAll(keepingCapacity: true)
        if terminated { forget(connection) }
    }

    /// What `maxConnectionsPerAddress` counts by (`SocketAddress.clientKey`).
    static func clientKey(_ address: SocketAddress) -> SocketAddress { address.clientKey }

    private func admit(_ connection: QUICConnection, address: SocketAddress, addressProven: Bool) {
        admitted[ObjectIdentifier(connection)] = Admission(connection: connection, address: address, countsForAddress: addressProven)
        halfOpen += 1
        if addressProven { perAddress[address, default: 0] += 1 }
    }

    private func handshakeCompleted(_ key: ObjectIdentifier) {
        guard var admission = admitted[key], admission.isHalfOpen else { return }
        admission.isHalfOpen = false
        halfOpen -= 1
        if !admission.countsForAddress {
            // Completing the handshake proved the address.
            admission.countsForAddress = true
            perAddress[admission.address, default: 0] += 1
        }
        admitted[key] = admission
    }

    private func route(_ id: ConnectionID, to connection: QUICConnection) {
        if lastRoute?.id == id { lastRoute = nil }
        routes[id] = connection
        admitted[ObjectIdentifier(connection)]?.ids.insert(id)
    }

    private func unroute(_ id: ConnectionID, of connection: QUICConnection) {
        if routes[id] === connection { routes[id] = nil }
        if lastRoute?.id == id { lastRoute = nil }
        admitted[ObjectIdentifier(connection)]?.ids.remove(id)
    }

    /// Drops every route to a terminated connection and its place in every count.
    private func forget(_ connection: QUICConnection) {
        if lastRoute?.connection === connection { lastRoute = nil }
        guard let admission = admitted.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        for id in admission.ids where routes[id] === connection {
            routes[id] = nil
        }
        if admission.isHalfOpen { halfOpen -= 1 }
        if admission.isEvicted { evicting -= 1 }
        if admission.countsForAddress {
            let left = (perAddress[admission.address] ?? 1) - 1
            perAddress[admission.address] = left > 0 ? left : nil
        }
        releaseSpareCapacity()
    }

    /// Dictionaries keep their largest capacity: after a flood the tables would stay at their
    /// peak. Once they are mostly empty they are copied into tables of the size they need.
    private func releaseSpareCapacity() {
        if routes.capacity > 1024 && routes.count < routes.capacity / 8 { routes = Dictionary(uniqueKeysWithValues: routes.map { $0 }) }
        if admitted.capacity > 1024 && admitted.count < admitted.capacity / 8 {
            admitted = Dictionary(uniqueKeysWithValues: admitted.map { $0 })
        }
        if perAddress.capacity > 1024 && perAddress.count < perAddress.capacity / 8 {
            perAddress = Dictionary(uniqueKeysWithValues: perAddress.map { $0 })
        }
    }

    // MARK: Limits

    /// The established connection without streams that has gone longest without a packet
    /// from its peer, if any: the one a new client may replace when the table is full.
    private func longestIdleConnection() -> QUICConnection? {
        var best: QUICConnection?
        for admission in admitted.values where !admission.isHalfOpen && !admission.isEvicted {
            let connection = admission.connection
            guard connection.isEstablished, connection.streamCount == 0 else { continue }
            if best.map({ connection.lastReceiveTime < $0.lastReceiveTime }) ?? true { best = connection }
        }
        return best
    }

    /// Closes `connection`, which the listener's buffer budget picked (it holds bytes that drain
    /// too slowly) while the listener is over its buffer limit: as an eviction (NO_ERROR, `stalledAtBufferLimitReason`),
    /// written by the owner after `pollEvictedConnections()`.
    package func closeOverBufferLimit(_ connection: QUICConnection, now: QUICInstant) {
        guard let admission = admitted[ObjectIdentifier(connection)], !admission.isEvicted, !connection.isClosed else { return }
        evict(connection, reason: Self.stalledAtBufferLimitReason, now: now)
    }

    /// Why a connection closed by `closeOverBufferLimit` was closed.
    package static let stalledAtBufferLimitReason = "server busy: buffer limit reached, closed a connection whose buffered bytes drained too slowly"

    private func evict(_ connection: QUICConnection, reason: String = "server busy: idle connection closed to make room", now: QUICInstant) {
        let key = ObjectIdentifier(connection)
        admitted[key]?.isEvicted = true
        evicting += 1
        evictedConnections += 1
        connection.evict(reason: reason, now: now)
        evictedSinceLastPoll.append(connection)
        applyRoutingChanges(of: connection)
    }

    /// Why clients are refused once `isAcceptingNewConnections` is false.
    package static let shuttingDownReason = "server shutting down: not accepting new connections"

    /// Refuses a new client statelessly: CONNECTION_REFUSED with a reason that says why.
    private func refuse(_ header: ngtcp2_pkt_hd, reason: String, path: QUICPath) {
        refusedConnections += 1
        sendStatelessClose(header, errorCode: UInt64(NGTCP2_CONNECTION_REFUSED), reason: reason, path: path)
    }

    // MARK: Endpoint-level packets

    private func enqueue(_ bytes: UnsafeRawBufferPointer, path: QUICPath) {
        outgoing.append(Transmit(path: path, ecn: .notECT, segmentSize: bytes.count, bytes: Array(bytes)))
    }

    private func sendVersionNegotiation(_ vc: ngtcp2_version_cid, datagramLength: Int, path: QUICPath) {
        // RFC 9000 §6.1: only answer datagrams large enough to be a client's first flight.
        guard datagramLength >= 1200, let dcid = vc.dcid, let scid = vc.scid else { return }
        var versions: [UInt32] = [0x1a2a_3a4a, UInt32(NGTCP2_PROTO_VER_V1)]
        var buffer = [UInt8](repeating: 0, count: 1200)
        var unused: [UInt8] = [0]
        fillRandom(&unused)
        let length = ngtcp2_pkt_write_version_negotiation(&buffer, buffer.count, unused[0], scid, vc.scidlen, dcid, vc.dcidlen, &versions, versions.count)
        guard length > 0 else { return }
        versionNegotiationsSent += 1
        buffer.withUnsafeBytes { enqueue(UnsafeRawBufferPointer(rebasing: $0[0..<length]), path: path) }
    }

    private func sendRetry(_ header: ngtcp2_pkt_hd, datagramLength: Int, path: QUICPath, now: QUICInstant) {
        var header = header
        // Encoded like every other ID, so a balancer routes the client's next Initial back here.
        var retrySCID = connectionIDs.nextWithRandomNonce { routes[$0] != nil }.ngtcp2
        var token = [UInt8](repeating: 0, count: braid_ngtcp2_crypto_max_retry_tokenlen())
        let tokenLength = keys.ring.current.tokenSecret.withUnsafeBufferPointer { secret in
            path.remote.withSockAddr { address, length in
                ngtcp2_crypto_generate_retry_token(
                    &token, secret.baseAddress, secret.count, header.version, address, ngtcp2_socklen(length), &retrySCID,
                    &header.dcid, now.nanoseconds)
            }
        }
        guard tokenLength > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 1200)
        // Never more than three times what the client sent (anti-amplification).
        let limit = min(buffer.count, datagramLength * 3)
        let length = ngtcp2_crypto_write_retry(
            &buffer, limit, header.version, &header.scid, &retrySCID, &header.dcid, token, tokenLength)
        guard length > 0 else { return }
        retriesSent += 1
        buffer.withUnsafeBytes { enqueue(UnsafeRawBufferPointer(rebasing: $0[0..<length]), path: path) }
    }

    private func sendStatelessClose(_ header: ngtcp2_pkt_hd, errorCode: UInt64, reason: String = "", path: QUICPath) {
        var header = header
        var buffer = [UInt8](repeating: 0, count: 1200)
        let reasonBytes = Array(reason.utf8)
        let length = reasonBytes.withUnsafeBufferPointer { reason in
            ngtcp2_crypto_write_connection_close(
                &buffer, buffer.count, header.version, &header.scid, &header.dcid, errorCode, reason.baseAddress, reason.count)
        }
        guard length > 0 else { return }
        buffer.withUnsafeBytes { enqueue(UnsafeRawBufferPointer(rebasing: $0[0..<length]), path: path) }
    }

    private func sendStatelessReset(for dcid: ConnectionID, triggerLength: Int, path: QUICPath, now: QUICInstant) {
        // RFC 9000 §10.3: smaller than the trigger (no reset loops), at least 21 bytes, rate limited.
        let length = min(triggerLength - 1, 43)
        guard length >= 22 else { return }
        if now - resetWindow.start >= .seconds(1) { resetWindow = (now, 0) }
        // The ID may have been issued under the minting generation or, during a rotation, the
        // one before: one reset for each (two resets, each smaller than the trigger, stay
        // under RFC 9000's threefold limit).
        for generation in keys.ring.accepted(at: now).prefix(2) {
            guard resetWindow.count < Self.maxResetsPerSecond else { return }
            resetWindow.count += 1
            var cid = dcid.ngtcp2
            var token = [UInt8](repeating: 0, count: Int(NGTCP2_STATELESS_RESET_TOKENLEN))
            let rc = generation.resetSecret.withUnsafeBufferPointer {
                ngtcp2_crypto_generate_stateless_reset_token(&token, $0.baseAddress, $0.count, &cid)
            }
            guard rc == 0 else { return }
            var random = [UInt8](repeating: 0, count: length - 1 - token.count)
            fillRandom(&random)
            var buffer = [UInt8](repeating: 0, count: length)
            let written = ngtcp2_pkt_write_stateless_reset(&buffer, buffer.count, token, random, random.count)
            guard written > 0 else { return }
            statelessResetsSent += 1
            buffer.withUnsafeBytes { enqueue(UnsafeRawBufferPointer(rebasing: $0[0..<written]), path: path) }
        }
    }
}

/// The TLS state all of one endpoint's sessions share: credentials, the session-ticket key and
/// the 0-RTT replay filter. Sessions hold raw pointers into it, so every connection retains it.
final class ServerTLSContext {
    let credentials: TLSCredentials
    /// The fleet's keys: each new session takes the minting generation's ticket key.
    private let ring: ServerKeyRing
    /// This endpoint's own (it runs on one thread), recording into the filter all share.
    private let antiReplay: TLSAntiReplay

    init(credentials: TLSCredentials, keys: QUICServerKeys) throws {
        self.credentials = credentials
        antiReplay = try TLSAntiReplay(filter: keys.replayFilter)
        ring = keys.ring
    }

    func makeSession(configuration: QUICServerConfiguration, connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>) throws -> gnutls_session_t {
        var flags = GNUTLS_SERVER.rawValue | GNUTLS_NO_AUTO_SEND_TICKET.rawValue | GNUTLS_NO_END_OF_EARLY_DATA.rawValue
        if configuration.earlyDataEnabled { flags |= GNUTLS_ENABLE_EARLY_DATA.rawValue }
        var created: gnutls_session_t?
        var rc = gnutls_init(&created, flags)
        guard rc == 0, let session = created else { throw QUICError.tls("gnutls_init: \(gnutlsErrorString(rc))") }
        do {
            rc = setQUICPriority(on: session)
            guard rc == 0 else { throw QUICError.tls("priority: \(gnutlsErrorString(rc))") }
            let generation = ring.current
            rc = gnutls_session_ticket_enable_server(session, generation.ticketKey.datum)
            guard rc == 0 else { throw QUICError.tls("session tickets: \(gnutlsErrorString(rc))") }
            if let lifetime = configuration.ticketLifetime {
                gnutls_db_set_cache_expiration(session, Int32(clamping: lifetime))
            }
            // A resuming client's ticket may come from an older generation of the fleet's keys.
            gnutls_handshake_set_hook_function(session, UInt32(GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue), GNUTLS_HOOK_PRE) {
                session, _, _, _, message in
                guard let message, let data = message.pointee.data, let connection = QUICConnection.from(session: session),
                    let ring = connection.serverKeyRing
                else { return 0 }
                ring.selectTicketKey(
                    for: session!, clientHello: UnsafeRawBufferPointer(start: data, count: Int(message.pointee.size)),
                    now: connection.currentTime)
                return 0
            }
            rc = ngtcp2_crypto_gnutls_configure_server_session(session)
            guard rc == 0 else { throw QUICError.tls("cannot configure the QUIC TLS session") }
            if configuration.earlyDataEnabled {
                gnutls_anti_replay_enable(session, antiReplay.handle)
                // QUIC requires max_early_data_size 0xffffffff in tickets (RFC 9001 §4.6.1).
                gnutls_record_set_max_early_data_size(session, 0xffff_ffff)
            }
            gnutls_session_set_ptr(session, connRef)
            rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.handle))
            guard rc == 0 else { throw QUICError.tls("credentials: \(gnutlsErrorString(rc))") }
            rc = withALPNDatums(configuration.alpn) {
                gnutls_alpn_set_protocols(
                    session, $0, UInt32($1), GNUTLS_ALPN_MANDATORY.rawValue | GNUTLS_ALPN_SERVER_PRECEDENCE.rawValue)
            }
            guard rc == 0 else { throw QUICError.configuration("ALPN \(configuration.alpn): \(gnutlsErrorString(rc))") }
        } catch {
            gnutls_deinit(session)
            throw error
        }
        return session
    }

}

/// The secrets every endpoint serving one address must agree on, so that any of them can
/// handle any client: the fleet's `ServerKeyRing` (address tokens, stateless resets, session
/// tickets: a ticket from one endpoint resumes on another) and one 0-RTT replay filter (a
/// ClientHello replayed to a second endpoint of this process is still refused).
///
/// ```swift
/// let keys = try QUICServerKeys()
/// let endpoints = try (0..<2).map {
///     try QUICServerEndpoint(configuration: configuration, keys: keys, connectionIDTag: UInt8($0))
/// }
/// ```
package final class QUICServerKeys: Sendable {
    package let ring: ServerKeyRing
    let replayFilter = TLSReplayFilter()

    /// - Parameter staticSecret: at least 16 bytes; share it across restarts to keep tokens and
    ///   stateless resets valid. Nil picks a random one. The ticket key is random.
    package init(staticSecret: [UInt8]? = nil) throws {
        var secret: [UInt8]
        if let staticSecret {
            guard staticSecret.count >= 16 else { throw QUICError.configuration("staticSecret needs at least 16 bytes") }
            secret = staticSecret
        } else {
            secret = [UInt8](repeating: 0, count: 32)
            fillRandom(&secret)
        }
        ring = try mappingTLSErrors { try ServerKeyRing(staticSecret: secret) }
    }

    /// Keys from a fleet's ring (shared with other servers, rotated by its owner).
    package init(ring: ServerKeyRing) { self.ring = ring }

    /// The configuration's key ring, or keys from its static secret.
    package convenience init(for configuration: QUICServerConfiguration) throws {
        if let ring = configuration.keyRing {
            self.init(ring: ring)
        } else {
            try self.init(staticSecret: configuration.staticSecret)
        }
    }
}
