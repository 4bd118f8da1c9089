import BraidCore
import BraidIO
import Logging

/// A connection's public-facing state on its loop: the owner of its channel in the IO layer
/// (any `ConnectionChannel`: the stack's binding makes it, see `StackBinding`) and the
/// delegate that turns what the channel reports into states, the snapshot and, for QUIC,
/// stream facades. Only its loop touches it. What only one stack's channel does is reached
/// from that stack's folder (`ConnectionCore+QUIC`, `+ByteStream`, `+Datagram`).
final class ConnectionCore: ConnectionChannelDelegate {
    /// The channel. The stack decides its kind when the connection is made, so the QUIC-only
    /// API (on `NetworkConnection<QUIC>`) always finds a QUIC channel, the byte-stream API (on
    /// TLS and TCP connections) a byte-stream channel, and the UDP API a datagram channel.
    let owner: any ConnectionChannel
    let shared: ConnectionShared
    /// Called once when the connection ends (a listener frees the connection's place).
    var whenEnded: (() -> Void)?
    /// Description of the peer for error messages.
    let endpointDescription: String
    /// The watch over the kernel's interfaces (made on first use: `pathWatch(constraints:)`).
    private(set) var madePathWatch: ConnectionPathWatch?
    /// Times a QUIC connection moved to a new path (`migrate()`, or by itself).
    var migrations: UInt64 = 0
    /// A client's race of its endpoint's addresses, while it runs (it keeps itself alive
    /// through what it waits on).
    weak var establishment: ClientEstablishment?
    /// The race, kept once ready by a connection that can move to its next address (UDP)
    /// until the connection ends.
    var establishmentAfterReady: ClientEstablishment?
    /// Where the connection reports (nil: no metrics backend). Set before its channel hears
    /// anything, or (a listener's connection, whose channel may be ready as it is made) on
    /// the loop right after.
    var metrics: ConnectionMetrics? {
        didSet { metricsAttached() }
    }
    /// When the handshake began (set only with `metrics`).
    private var handshakeStart: ContinuousClock.Instant?
    private var becameReady = false
    /// Where the connection logs, carrying its identity once named (`identify`); its channel
    /// logs through the same logger.
    private(set) var logger = BraidLog.logger(label: "braid.connection")
    private(set) var identity: ConnectionLogIdentity?

    /// The core over `channel`, whose delegate the caller sets to it (each stack's channel has
    /// its own delegate property: QUIC's hears more than ready and the end).
    init(channel: any ConnectionChannel, shared: ConnectionShared, endpointDescription: String) {
        owner = channel
        self.shared = shared
        self.endpointDescription = endpointDescription
    }

    /// The core a client connection over `stack` needs, made by the stack's binding (a stack
    /// without one gets a datagram core that never connects: `start()` fails it).
    static func make(for stack: some NetworkProtocol, loop: EventLoop, endpointDescription: String) -> ConnectionCore {
        let binding = StackBindings.binding(of: stack)
        let core = binding.makeCore(loop: loop, endpointDescription: endpointDescription, maximumMessageSize: nil)
        core.metrics = ConnectionMetrics.client(stack: binding.metricsName)
        core.identify(ConnectionLogIdentity.next(stack: binding.metricsName, role: "client"), logger: core.logger)
        return core
    }

    var loop: EventLoop { owner.loop }

    /// Why the connection ended, once it has.
    var finalError: (any Error)? { owner.finalError }

    /// Ends the connection with `error` before (or without) an engine: every pending call fails.
    func fail(_ error: NetworkError) {
        owner.fail(error)
    }

    /// Closes the connection (QUIC: application error code 0; TLS: close_notify) and ends
    /// every pending call with `NetworkError.cancelled`.
    func cancel(context: LoopContext) {
        owner.cancel(context: context)
    }

    /// Closes at once (TCP and TLS: a reset) and ends every pending call with
    /// `NetworkError.cancelled`.
    func forceCancel(context: LoopContext) {
        owner.forceCancel(context: context)
    }

    // MARK: ConnectionChannelDelegate

    func channelBecameReady(_ channel: any ConnectionChannel) {
        let facts = channel.facts
        shared.snapshot.withLock {
            $0.negotiatedALPN = facts.negotiatedALPN
            $0.earlyDataAccepted = facts.earlyDataAccepted
            $0.resumed = facts.resumed
            $0.multipath = facts.multipath
            $0.security = facts.security
            $0.upgrade = facts.upgrade
            // A Unix-domain connection's ends are both known by its socket file.
            let unix = facts.unixPath.map { NWEndpoint.unix(path: $0) }
            $0.localEndpoint = unix ?? facts.localAddress.map(NWEndpoint.init)
            $0.remoteEndpoint = unix ?? facts.remoteAddress.map(NWEndpoint.init)
        }
        becameReady = true
        logReady(facts)
        if let metrics, let handshakeStart {
            metrics.connectionOpened(handshake: channel.handshakeDuration ?? ContinuousClock.now - handshakeStart)
        }
        shared.states.update(.ready)
        // The path watch (if any) reports the first path.
        madePathWatch?.evaluateNow()
    }

    func channel(_ channel: any ConnectionChannel, endedWith error: any Error) {
        whenEnded?()
        whenEnded = nil
        establishmentAfterReady = nil
        madePathWatch?.stop()
        let error = NetworkError(error)
        logger.debug("ended", metadata: ["error": "\(error)", "was_ready": "\(becameReady)"])
        metrics?.connectionEnded(wasReady: becameReady, reason: error.metricsReason, pathChanges: migrations)
        shared.states.update(error == .cancelled ? .cancelled : .failed(error))
        shared.stackPart.connectionEnded()
    }

    // MARK: Logging

    /// Names the connection in every line it and its channel log from now on: `base` (made
    /// where the connection was made, so it goes where that task's lines go) tagged with
    /// `identity`. A listener's connection may be ready already: its ready line is logged now.
    func identify(_ identity: ConnectionLogIdentity, logger base: Logger) {
        var logger = base
        identity.tag(&logger)
        self.identity = identity
        self.logger = logger
        owner.logger = logger
        if becameReady { logReady(owner.facts) }
    }

    private func logReady(_ facts: ConnectionFacts) {
        logger.debug("ready", metadata: [
            "peer": "\(facts.unixPath ?? facts.remoteAddress.map { "\($0)" } ?? endpointDescription)",
            "alpn": "\(facts.negotiatedALPN ?? "none")",
        ])
    }

    // MARK: Metrics

    /// Asks the channel for its traffic at its end, and starts the handshake's clock (a
    /// client's restarts when it starts: `handshakeStarted`).
    private func metricsAttached() {
        guard let metrics else {
            owner.trafficObserver = nil
            return
        }
        owner.trafficObserver = { traffic in metrics.record(traffic) }
        handshakeStart = ContinuousClock.now
        // A listener's TCP connection is ready as it is accepted, before this is set (a QUIC
        // listener's may be too: its channel measured the handshake from the first Initial).
        if becameReady { metrics.connectionOpened(handshake: owner.handshakeDuration ?? .zero) }
    }

    /// A client's establishment begins: its handshake time counts from here.
    func handshakeStarted() {
        if metrics != nil { handshakeStart = ContinuousClock.now }
    }

    // MARK: Calls from the public API (on the loop)

    /// The connection's watch over the kernel's interfaces; the first call makes it with the
    /// connection's interface `constraints`.
    func pathWatch(constraints: InterfaceConstraints) -> ConnectionPathWatch {
        if let madePathWatch { return madePathWatch }
        let made = ConnectionPathWatch(core: self, constraints: constraints)
        madePathWatch = made
        return made
    }
}

extension NWEndpoint {
    init(_ address: SocketAddress) {
        self = .hostPort(host: NWEndpoint.Host(address.ipString), port: NWEndpoint.Port(integerLiteral: address.port))
    }
}
