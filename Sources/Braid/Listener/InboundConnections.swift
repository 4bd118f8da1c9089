import BraidIO
import BraidQUIC

/// One server loop's connections: makes a public connection, with its own channel, for each
/// new engine connection and hands the channel that connection's events. Lives on the loop.
final class InboundConnections<ApplicationProtocol: NetworkProtocol> {
    private unowned let driver: QUICServerDriver
    private let context: LoopContext
    private let stack: ApplicationProtocol
    private let transport: QUICTransportConfiguration
    private let intake: InboundIntake<ApplicationProtocol>
    /// Runs on each new connection's channel before it hears any event (HTTP/3 takes the
    /// channel's streams here).
    private let prepare: (@Sendable (QUICChannel) -> Void)?
    /// The channels of live connections (the public connections are their handlers' to keep).
    private var channels: [ObjectIdentifier: QUICChannel] = [:]
    /// Connections refused because `run` was cancelled after the endpoint took them: their
    /// remaining events go nowhere. Held (not only their identifiers) until they terminate,
    /// so a new connection cannot reuse an identifier still listed here.
    private var refused: [ObjectIdentifier: QUICConnection] = [:]

    init(
        driver: QUICServerDriver, context: LoopContext, stack: ApplicationProtocol, transport: QUICTransportConfiguration,
        prepare: (@Sendable (QUICChannel) -> Void)? = nil, intake: InboundIntake<ApplicationProtocol>
    ) {
        self.prepare = prepare
        self.driver = driver
        self.context = context
        self.stack = stack
        self.transport = transport
        self.intake = intake
    }

    func handle(_ connection: QUICConnection, _ event: QUICEvent) {
        let key = ObjectIdentifier(connection)
        let channel: QUICChannel
        if let existing = channels[key] {
            channel = existing
        } else {
            if refused[key] != nil {
                if case .terminated = event { refused[key] = nil }
                return
            }
            switch event {
            case .connectionClosed, .terminated:
                // A handshake that ended before anything reached the application (abandoned,
                // refused, timed out): nobody is told, and no connection object is made for it.
                return
            default: break
            }
            let admitted = intake.admit {
                let inbound = NetworkConnection<ApplicationProtocol>.running(
                    connection, transport: QUICServerConnectionTransport(driver: driver, connection: connection),
                    peer: NWEndpoint(connection.path.remote), stack: stack, configuration: transport, context: context)
                prepare?(inbound.core.value.channel)
                return inbound
            }
            guard let admitted else {
                // `run` was cancelled after the endpoint took this client (the endpoint's own
                // refusal reaches it at the loop's next pass): refused the same way.
                connection.refuse(reason: QUICServerEndpoint.shuttingDownReason, now: context.now)
                refused[key] = connection
                driver.service(connection, context)
                return
            }
            channel = admitted.core.value.channel
            channels[key] = channel
        }
        channel.handle(event, context: context)
        if case .terminated = event { channels[key] = nil }
    }
}

extension NetworkConnection {
    /// The public connection of an engine connection that already runs on this loop (a
    /// listener's inbound connection, or a test's): its channel takes over `engine`, served by
    /// `transport`. Call on the loop.
    static func running(
        _ engine: QUICConnection, transport: QUICChannelTransport, peer: NWEndpoint, stack: ApplicationProtocol,
        configuration: QUICTransportConfiguration, context: LoopContext
    ) -> NetworkConnection {
        let core = ConnectionCore(
            loop: context.loop, endpointDescription: peer.description, handshakeTimeout: configuration.handshakeTimeout,
            streamSendLimit: configuration.streamSendBufferLimit, connectionSendLimit: configuration.connectionSendBufferLimit)
        core.channel.attach(engine, transport: transport, context: context)
        core.shared.states.update(.preparing)
        return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: context.loop), shared: core.shared)
    }
}
