import BraidIO
import BraidQUIC
import BraidQUICIO

/// QUIC's part in establishment: each attempt is a `QUICClientAttempt` (a client driver with
/// its own socket), and it wins when its handshake completes. With a cached session ticket the
/// first attempt resumes and may carry 0-RTT data, so it is the connection from the start.
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

    init(core: ConnectionCore, quic: QUIC, endpoint: NWEndpoint, sockets: any DatagramSocketFactory) {
        self.core = core
        self.quic = quic
        self.sockets = sockets
        serverName = quic.serverName ?? endpoint.host.description
    }

    var ipVersion: IP.Version { quic.udp.ip.version }

    func standIn(for race: ClientEstablishment, context: LoopContext) {
        self.race = race
        core.quic.setTransport(self)
    }

    func attempt(
        _ remote: SocketAddress, alone: Bool, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        let cacheKey = ticketKey(for: remote)
        // Under interface constraints, every socket of the connection (migrations' too) is
        // bound to the chosen interface.
        let sockets = try race.boundSockets(self.sockets, toward: remote)
        let bindAddress = try (race.local?.address ?? sockets.localAddress(toward: remote)).withPort(race.local?.port ?? 0)
        // Taken (tickets are single-use) only once this address looks usable.
        // A stale one is dropped: a full handshake.
        let ticket = alone ? quic.sessionCache?.take(cacheKey).flatMap { $0.isUsable() ? $0 : nil } : nil
        let client = try ClientContexts.context(for: quic)
        let handshakeTimeout = quic.transport.handshakeTimeout
        let attempt = try QUICClientAttempt(
            context: context, client: client, remote: remote, serverName: serverName, resumption: ticket, local: bindAddress,
            batching: quic.udp.batching, sockets: sockets
        ) { attempt, outcome, context in
            switch outcome {
            case .connected:
                race.attemptSucceeded(attempt, context: context)
            case .failed(let error):
                let endpoint = NWEndpoint(attempt.remoteAddress).description
                race.attemptFailed(
                    attempt, error: NetworkError(quic: error, endpoint: endpoint, handshakeTimeout: handshakeTimeout),
                    context: context)
            }
        }
        return (attempt, ticket != nil)
    }

    /// Where this connection's tickets are kept: per server name and port, per the checks that
    /// accepted the server (a ticket resumes only under the same ones), and per the
    /// certificate this client presented.
    private func ticketKey(for remote: SocketAddress) -> String {
        let identity = TLSIdentityMaterial.resumptionScope(quic.identityMaterial, certificateChainFile: quic.certificateChainFile)
        return "\(serverName):\(remote.port):\(quic.verification.resumptionScope):\(identity)"
    }

    /// Hands the winning attempt to the connection's channel, which gets its events from now on.
    func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        race = nil
        guard let attempt = attempt as? QUICClientAttempt else { return }
        let channel = core.quic
        if let cache = quic.sessionCache {
            let key = ticketKey(for: attempt.remoteAddress)
            channel.ticketReceived = { ticket in cache.store(ticket, for: key) }
        }
        attempt.adopt(into: channel, context: context)
    }
}

/// A QUIC attempt abandons itself by closing its connection.
extension QUICClientAttempt: EstablishmentAttempt {}

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
