import BraidIO
import BraidQUIC

/// QUIC's part in establishment: each attempt is a client driver with its own socket, and it
/// wins when its handshake completes. With a cached session ticket the first attempt resumes
/// and may carry 0-RTT data, so it is the connection from the start.
final class QUICEstablishment: EstablishmentStrategy {
    private let core: ConnectionCore
    private let quic: QUIC
    /// A name, or the address literal (the engine sends no SNI for literals).
    private let serverName: String
    /// Where the attempts' sockets come from.
    private let sockets: any DatagramSocketFactory
    /// The race while it runs (kept alive by what it waits on: the lookup, its timer, its
    /// attempts' handlers).
    private weak var race: ClientEstablishment?
    /// The attempt handed to the channel. Events of the pass that adopted it still come
    /// through the attempt's handler (the driver took it before the pass began): they go on
    /// to the channel.
    private weak var adopted: QUICClientDriver?

    init(core: ConnectionCore, quic: QUIC, endpoint: NWEndpoint, sockets: any DatagramSocketFactory) {
        self.core = core
        self.quic = quic
        self.sockets = sockets
        serverName = quic.serverName ?? endpoint.host.description
    }

    var ipVersion: IP.Version { quic.udp.ip.version }

    func standIn(for race: ClientEstablishment, context: LoopContext) {
        self.race = race
        core.channel.setTransport(self)
    }

    func attempt(
        _ remote: SocketAddress, alone: Bool, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        let cacheKey = "\(serverName):\(remote.port)"
        // Under interface constraints, every socket of the connection (migrations' too) is
        // bound to the chosen interface.
        let sockets = try race.interface(toward: remote).map { try self.sockets.boundToDevice($0.name) } ?? self.sockets
        let bindAddress = try (race.local?.address ?? sockets.localAddress(toward: remote)).withPort(race.local?.port ?? 0)
        // Taken (tickets are single-use) only once this address looks usable.
        let ticket = alone ? quic.sessionCache?.take(cacheKey) : nil
        let client = try ClientContexts.context(for: quic)
        var driver: QUICClientDriver?
        let attempt = try QUICClientDriver(
            context: context, client: client, remote: remote, serverName: serverName, resumption: ticket,
            local: bindAddress, batching: quic.udp.batching, sockets: sockets
        ) { [self] _, event in
            // Before `init` returns, the driver's first service pass can report events too.
            guard let driver else { return }
            attemptEvent(event, driver: driver, race: race, context: context)
        }
        driver = attempt
        return (attempt, ticket != nil)
    }

    private func attemptEvent(_ event: QUICEvent, driver: QUICClientDriver, race: ClientEstablishment, context: LoopContext) {
        if driver === adopted {
            core.channel.handle(event, context: context)
            return
        }
        switch event {
        case .handshakeCompleted:
            race.attemptSucceeded(driver, context: context)
            if driver === adopted { core.channel.handle(event, context: context) }
        case .connectionClosed(let error):
            race.attemptFailed(
                driver,
                error: NetworkError(
                    quic: error, endpoint: NWEndpoint(driver.connection.path.remote).description,
                    handshakeTimeout: quic.transport.handshakeTimeout),
                context: context)
        case .terminated:
            // The driver closes its socket itself once terminated; drop our last reference.
            driver.onEvent = { _, _ in }
        default:
            break
        }
    }

    /// Hands the winning driver to the connection's channel, which gets its events from now on.
    func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        race = nil
        guard let driver = attempt as? QUICClientDriver else { return }
        adopted = driver
        let channel = core.channel
        if let cache = quic.sessionCache {
            let key = "\(serverName):\(driver.connection.path.remote.port)"
            channel.ticketReceived = { ticket in cache.store(ticket, for: key) }
        }
        // The driver and the channel keep each other until the connection terminates; then
        // the channel's release closes the socket and drops this handler.
        driver.onEvent = { [channel] _, event in channel.handle(event, context: context) }
        // Calls that were waiting for the connection (e.g. a 0-RTT send) can go now.
        channel.attach(driver.connection, transport: driver, context: context)
        driver.service(context)
    }
}

/// A QUIC attempt is its client driver; abandoning it closes its connection.
extension QUICClientDriver: EstablishmentAttempt {
    func abandon(_ context: LoopContext) {
        connection.close(applicationErrorCode: 0, reason: "", now: context.now)
        service(context)
    }
}

/// Until an attempt wins, the establishment stands in for the connection's transport: ending
/// the connection abandons the attempts.
extension QUICEstablishment: QUICChannelTransport {
    func service(_ context: LoopContext) {}
    func release(_ context: LoopContext) {
        race?.abandon(context)
        race = nil
    }
    var socketCounters: SocketCounters? { nil }
    func moveToNewPath(_ context: LoopContext, device: String?) throws -> SocketAddress {
        throw NetworkError.invalidState("migrate once the connection is ready")
    }
}
