import BraidCore
import BraidIO
import Logging
import Synchronization

/// Accepts inbound connections on a port and runs a handler for each.
///
/// ```swift
/// let listener = NetworkListener(port: 4433) {
///     QUIC(alpn: ["echo"]).identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// }
/// try await listener.run { connection in
///     try await connection.inboundStreams { stream in
///         let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
///         try await stream.send(request, endOfStream: true)
///     }
/// }
/// ```
///
/// Each connection's handler runs in its own child task; when it returns, the connection
/// closes. Cancelling the task that called `run` is the graceful shutdown: it stops accepting
/// at once (new QUIC clients are refused with CONNECTION_REFUSED, which a Braid client reports
/// as `NetworkError.serverBusy`; TLS and TCP listening sockets close, so the kernel refuses
/// new clients; a UDP listener drops a new peer's datagrams), cancels every handler, closes
/// every connection (QUIC: application error code 0) and the socket(s), and `run` returns once
/// the closes have been sent.
public final class NetworkListener<ApplicationProtocol: NetworkProtocol>: Sendable {
    /// The listener's states: `NetworkConnectionState`, with the same cases as a connection's.
    public typealias State = NetworkConnectionState

    /// The stack and options the listener serves; each inbound connection gets the same stack.
    public let parameters: NetworkParameters<ApplicationProtocol>
    /// The local address to bind; nil listens on every address, IPv4 and IPv6 (see
    /// `init(for:using:)`), or where the parameters' `localEndpoint(_:)` says.
    public let localEndpoint: NWEndpoint?
    private let broadcast = StateBroadcast()
    private let boundPort = Locked<NWEndpoint.Port?>(nil)
    private let limit = Locked(10_000)
    private let bufferLimit = Locked(256 * 1024 * 1024)
    private let label = Locked("")
    /// The running listener's buffer budget (tests read its counters).
    let bufferBudget = Locked<ListenerBufferBudget?>(nil)
    private let running = Atomic(false)
    /// The sockets and loops while `run` runs.
    private let group = Locked<(any ListenerGroup)?>(nil)
    /// While `runHTTP3` runs: counts the serving tasks it keeps by connection (tests check
    /// that each goes when its connection ends). Nil otherwise, so it keeps nothing alive.
    let servingTaskCounter = Locked<(@Sendable () -> Int)?>(nil)
    /// The DNS-SD service to advertise, its handler and advertiser (`NetworkListener+Service`).
    let serviceState = Locked(ListenerServiceState())
    private static var logger: Logger { BraidLog.logger(label: "braid.listener") }

    /// A listener on `endpoint` (a name resolves to its first address; nil: every address, port
    /// chosen by the system) with these parameters. Without an address, or on `::`, one
    /// dual-stack socket takes IPv4 and IPv6 clients alike (IPv4 peers show as plain IPv4
    /// endpoints; on a host without IPv6 it listens on IPv4 alone); `0.0.0.0` takes IPv4 only. Nothing binds until `run`. QUIC, TLS,
    /// TCP and UDP are implemented, with `TLV` and `Coder` over TLS and TCP and `Coder` over
    /// UDP: `run` throws `NetworkError.unsupported` for other stacks.
    public init(for endpoint: NWEndpoint? = nil, using parameters: NetworkParameters<ApplicationProtocol>) {
        localEndpoint = endpoint
        self.parameters = parameters
    }

    /// A listener on `endpoint` (nil: every address, IPv4 and IPv6, port chosen by the system)
    /// over the stack the builder returns.
    public convenience init(for endpoint: NWEndpoint? = nil, @ProtocolStackBuilder _ stack: () -> ApplicationProtocol) {
        self.init(for: endpoint, using: NetworkParameters(stack: stack()))
    }

    /// Listens on every address, IPv4 and IPv6, at `port` (`.any` or 0: the system picks; read
    /// `port`).
    public convenience init(port: NWEndpoint.Port, @ProtocolStackBuilder _ stack: () -> ApplicationProtocol) {
        self.init(for: .hostPort(host: .ipv6(.any), port: port), using: NetworkParameters(stack: stack()))
    }

    /// The system calls, datagrams and bytes of a QUIC listener's sockets so far (all its
    /// connections together: they share the sockets); nil unless running, and for TLS and TCP
    /// listeners (each of their connections has its own socket).
    ///
    /// ```swift
    /// if let sockets = await listener.socketStatistics { print(sockets.sendmmsgCalls) }
    /// ```
    public var socketStatistics: SocketStatistics? {
        get async { await group.withLock({ $0 })?.sharedSocketStatistics }
    }

    /// A QUIC listener's live counts (connections, half-open handshakes, streams, buffered
    /// bytes) and what it refused so far, over all its loops; nil unless running, and for TLS,
    /// TCP and UDP listeners.
    ///
    /// ```swift
    /// if let now = await listener.statistics { print(now.connections, now.halfOpenHandshakes) }
    /// ```
    public var statistics: ListenerStatistics? {
        get async { await group.withLock({ $0 })?.listenerStatistics }
    }

    /// The port listened on, once `ready` (nil for a Unix-domain listener).
    public var port: NWEndpoint.Port? { boundPort.withLock { $0 } }

    /// The state now: `setup` before `run`, `ready` once bound, `cancelled` after `run`
    /// returns, `failed` if it could not start.
    public var state: State { broadcast.current }
    /// The current state, then every change, ending after `failed` or `cancelled`.
    public var states: AsyncStream<State> { broadcast.stream() }

    /// Most connections at once (default 10,000); further clients are refused (QUIC: per
    /// server loop, handshakes in progress included; a new client takes the place of the
    /// connection idle longest, one without streams, and is refused with CONNECTION_REFUSED,
    /// `NetworkError.serverBusy` on a Braid client, when none is idle; TLS and TCP: the accepted
    /// connection is reset at once; UDP: a new peer takes the place of the oldest peer that has
    /// not sent again since the listener sent it a datagram, which fails with
    /// `NetworkError.serverBusy`, and when every peer has, a new peer's datagrams are dropped
    /// until a place frees up). Set before `run`.
    public var newConnectionLimit: Int {
        get { limit.withLock { $0 } }
        set { limit.withLock { $0 = newValue } }
    }

    /// Most bytes all the listener's connections buffer together (default 256 MiB). QUIC: what
    /// the engines hold (stream bytes sent and not yet acknowledged, HTTP/3's received and
    /// unread bytes, datagrams to send) and what waits outside them (sends not yet taken,
    /// received stream bytes and datagrams not yet read); ngtcp2's out-of-order stream data is
    /// not seen, and is bounded by each connection's receive window. TLS and TCP: sends queued
    /// or not yet written, received bytes not yet read, and TLS's buffers. UDP and DTLS:
    /// received datagrams not yet read, sends queued, and DTLS's engine queues. Apple's Network.framework has no such
    /// setting; this is Braid's, a bound on what peers can make a server hold however many
    /// connections they open. Measured on each server loop once a second. At the limit, new
    /// clients are refused (QUIC: CONNECTION_REFUSED, "server busy: buffer limit reached",
    /// `NetworkError.serverBusy` on a Braid client; TLS and TCP: reset at once; UDP: a new
    /// peer's datagrams are dropped; DTLS: a new client's hello gets no answer), and each loop
    /// closes connections until its share of the excess is gone: first those holding bytes
    /// that drained fewer than 64 KiB of them in the last second (written to the socket or
    /// acknowledged by the peer, or read by the application; a peer that grants no credit,
    /// reads nothing or trickles), largest first; after three seconds in a row at the limit,
    /// the largest holders however fast they drain. Their handlers see
    /// `NetworkError.serverBusy` (QUIC: the peer gets NO_ERROR with that reason; DTLS:
    /// close_notify). Each connection is also bounded on its own
    /// (`QUIC.connectionSendBufferLimit(_:)`, `TCP.sendBufferLimit(_:)`; UDP: 4,096 unread
    /// datagrams). Must be positive: `run` throws
    /// `NetworkError.invalidConfiguration` otherwise. Set before `run`.
    ///
    /// ```swift
    /// let listener = NetworkListener(port: 4433) {
    ///     TLS { TCP() }.identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    /// }
    /// listener.connectionBufferLimit = 64 * 1024 * 1024
    /// ```
    public var connectionBufferLimit: Int {
        get { bufferLimit.withLock { $0 } }
        set { bufferLimit.withLock { $0 = newValue } }
    }

    /// The `listener` label of the listener's metrics and of its connections' (default empty),
    /// so dashboards tell a process's listeners apart. Braid reports through swift-metrics
    /// once a backend is bootstrapped (`MetricsSystem.bootstrap`), and costs nothing without
    /// one; the Metrics article lists the names. Apple's Network.framework has no metrics;
    /// this is Braid's. Set before `run`.
    ///
    /// ```swift
    /// let listener = NetworkListener(port: 4433) {
    ///     TLS { TCP() }.identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    /// }
    /// listener.metricsLabel = "api"
    /// ```
    public var metricsLabel: String {
        get { label.withLock { $0 } }
        set { label.withLock { $0 = newValue } }
    }

    /// Binds, then calls `handler` for each inbound connection in a child task, until the
    /// calling task is cancelled or the listener fails. Throws if it cannot start.
    public func run(_ handler: @escaping @Sendable (NetworkConnection<ApplicationProtocol>) async throws -> Void) async throws {
        try await run(handler, prepareChannel: nil)
    }

    /// `run(_:)`, with `prepareChannel` called on each new connection's channel, on its loop,
    /// before the channel hears any event (HTTP/3 takes a QUIC channel's streams there).
    func run(
        _ handler: @escaping @Sendable (NetworkConnection<ApplicationProtocol>) async throws -> Void,
        prepareChannel: (@Sendable (any ConnectionChannel) -> Void)?
    ) async throws {
        guard !running.exchange(true, ordering: .relaxed) else {
            throw NetworkError.invalidState("this listener is already running")
        }
        broadcast.update(.preparing)
        let group: any ListenerGroup
        let stackName = StackBindings.binding(of: parameters.stack).metricsName
        let listenerMetrics = ConnectionMetrics.activeFactory.map {
            ListenerMetrics(factory: $0, stack: stackName, listener: metricsLabel)
        }
        let intake = InboundIntake<ApplicationProtocol>(
            metrics: ConnectionMetrics.make(stack: stackName, role: .server, listener: metricsLabel), stackName: stackName)
        let budget: ListenerBufferBudget
        do {
            var constraints = parameters.interfaceConstraints
            constraints.requiredInterface = nil
            if !constraints.isEmpty {
                // Not silently dropped: a listener would have to filter what arrives by interface.
                throw NetworkError.unsupported(
                    "requiredInterfaceType, prohibitedInterfaceTypes, prohibitedInterfaces, expensivePathsProhibited and constrainedPathsProhibited on listeners (a listener takes requiredInterface; connections apply them all)")
            }
            try checkService()
            let (endpoint, parameters) = try endpointToBind()
            let bufferLimit = connectionBufferLimit
            // A limit of zero or less would refuse every client while looking like it runs.
            guard bufferLimit > 0 else {
                throw NetworkError.invalidConfiguration(
                    "connectionBufferLimit is \(bufferLimit): it must be positive (the default is 256 MiB)")
            }
            budget = ListenerBufferBudget(limit: bufferLimit)
            bufferBudget.withLock { $0 = budget }
            var start = ListenerStart(
                parameters: parameters, address: try await bindAddress(endpoint), intake: intake,
                newConnectionLimit: newConnectionLimit, bufferBudget: budget, prepareChannel: prepareChannel)
            start.unixPath = try endpoint?.unixSocketPath
            group = try await StackBindings.binding(of: parameters.stack).startListener(start)
            // A Unix-domain listener has a path, not a port.
            if start.unixPath == nil { boundPort.withLock { $0 = NWEndpoint.Port(integerLiteral: group.localAddress.port) } }
            self.group.withLock { $0 = group }
            // Cancelling `run` closes the intake at once (no connection is made for which no
            // handler would run), and the sockets stop taking new clients: waiting for `run` to
            // get there left them accepting clients nobody served while handlers ran down.
            intake.closeWhenCancelled { group.stopAccepting() }
        } catch {
            let error = NetworkError(error)
            broadcast.update(.failed(error))
            throw error
        }
        broadcast.update(.ready)
        let sweeper = listenerMetrics.map { metrics in Task { await metrics.watch(group, budget: budget) } }
        if let port = boundPort.withLock({ $0 }) { startAdvertising(port: port.rawValue, intake: intake) }
        await withDiscardingTaskGroup { tasks in
            // Ends when the calling task is cancelled (after any connection admitted before).
            for await connection in intake.connections {
                tasks.addTask {
                    listenerMetrics?.liveConnections.withLock { $0 += 1 }
                    defer { listenerMetrics?.liveConnections.withLock { $0 -= 1 } }
                    do {
                        try await handler(connection)
                    } catch {
                        Self.logger.debug("connection handler for \(connection.endpoint) ended: \(error)")
                    }
                    // Awaited, so `run` returns only once every close is on its way to the peer.
                    await connection.close()
                }
            }
            tasks.cancelAll()
        }
        stopAdvertising()
        if let sweeper {
            // Its last reading, before the group closes.
            sweeper.cancel()
            await sweeper.value
        }
        self.group.withLock { $0 = nil }
        await group.close()
        listenerMetrics?.stopped()
        if let failure = serviceState.withLock({ $0.failure }) {
            broadcast.update(.failed(failure))
            throw failure
        }
        broadcast.update(.cancelled)
    }

    /// Where the listener binds: its own endpoint, or the parameters' `localEndpoint(_:)` or
    /// `localPort(_:)` (Network.framework's way of saying it), with the parameters left
    /// without it.
    private func endpointToBind() throws -> (NWEndpoint?, NetworkParameters<ApplicationProtocol>) {
        guard let requested = parameters.localEndpoint else { return (localEndpoint, parameters) }
        if let localEndpoint, localEndpoint != requested {
            throw NetworkError.invalidConfiguration(
                "the listener's endpoint (\(localEndpoint)) and its parameters' localEndpoint (\(requested)) differ: give one of them")
        }
        var endpoint = requested
        // `localPort(_:)`: that port on every address.
        if case .hostPort(.name(""), let port) = requested { endpoint = .hostPort(host: .ipv6(.any), port: port) }
        return (endpoint, parameters.withoutLocalEndpoint)
    }

    private func bindAddress(_ localEndpoint: NWEndpoint?) async throws -> SocketAddress {
        guard let localEndpoint else { return DualStack.wildcard(port: 0) }
        if case .unix = localEndpoint { return .unspecified }
        // `::` is where "every address" binds; a host without IPv6 still listens, on IPv4.
        if case .hostPort(.ipv6(.any), let port) = localEndpoint { return DualStack.wildcard(port: port.rawValue) }
        let addresses = try await Resolver.addresses(for: localEndpoint)
        return addresses[0]
    }
}
