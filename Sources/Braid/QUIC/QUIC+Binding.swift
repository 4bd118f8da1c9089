import BraidIO
import BraidQUIC
import BraidQUICIO

/// QUIC connections: a `QUICChannel` each; a client races `QUICEstablishment`'s attempts, a
/// listener is a `QUICServerGroup` whose loops hand new engine connections to channels.
extension QUIC: StackBinding {
    func makeCore(loop: EventLoop, endpointDescription: String, maximumMessageSize: Int?) -> ConnectionCore {
        ConnectionCore(quicOn: loop, endpointDescription: endpointDescription, transport: transport)
    }

    func startClient(_ start: ClientStart) throws {
        try start.requireNoMultipath(on: "QUIC connections")
        let endpoint = start.endpoint, sockets = try start.datagramSockets()
        // A QUIC client moves to another interface by itself when its own goes away.
        start.begin(migratesWhenPathGoesAway: true) { core in
            QUICEstablishment(core: core, quic: self, endpoint: endpoint, sockets: sockets)
        }
    }

    func startListener<Top: NetworkProtocol>(_ listener: ListenerStart<Top>) async throws -> any ListenerGroup {
        try listener.requireNoMultipath(on: "QUIC listeners")
        try listener.requireIPAddress(on: "QUIC listeners")
        var configuration = try serverConfiguration()
        configuration.maxConnections = listener.newConnectionLimit
        let stack = listener.stack, transport = transport, intake = listener.intake, prepare = listener.prepareChannel
        let budget = listener.bufferBudget
        return try await QUICServerGroup.start(
            loops: listener.loops(serverLoops), configuration: configuration, bindTo: listener.address,
            batching: udp.batching, sockets: try listener.datagramSockets()
        ) { driver, context in
            driver.watchBufferBudget(budget, context: context)
            // A handshake that fails inside the listener counts as a failed connection.
            let handshakeFailed = intake.metrics.map { metrics in
                { (error: QUICError) in
                    let reason = NetworkError(quic: error, endpoint: "", handshakeTimeout: transport.handshakeTimeout).metricsReason
                    metrics.connectionEnded(wasReady: false, reason: reason, pathChanges: 0)
                }
            }
            return QUICInboundChannels(driver: driver, context: context, handshakeFailed: handshakeFailed) { peer, attach in
                intake.admit {
                    let inbound = NetworkConnection<Top>.running(
                        peer: NWEndpoint(peer), stack: stack, configuration: transport, context: context, attach: attach)
                    prepare?(inbound.core.value.quic)
                    return inbound
                }?.core.value.quic
            }.handle
        }
    }
}

extension NetworkConnection {
    /// The public connection of an engine connection that already runs on this loop (a
    /// listener's inbound connection, or a test's): `attach` hands the engine to the new
    /// connection's channel. Call on the loop.
    static func running(
        peer: NWEndpoint, stack: ApplicationProtocol, configuration: QUICTransportConfiguration, context: LoopContext,
        attach: (QUICChannel) -> Void
    ) -> NetworkConnection {
        let core = ConnectionCore(quicOn: context.loop, endpointDescription: peer.description, transport: configuration)
        attach(core.quic)
        core.shared.states.update(.preparing)
        return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: context.loop), shared: core.shared)
    }
}
