import BraidIO

/// UDP's part in establishment. UDP has no handshake, so an attempt succeeds at once: the
/// first address (in Happy Eyeballs order) that has a route gets a socket bound and connected
/// to it (the kernel then drops other senders' datagrams) and becomes the connection, without racing. An address with no route (ENETUNREACH and the
/// like, found when the socket's local address is looked up) moves on to the next address;
/// when none has a route the connection goes to `waiting(error)` and retries at the next
/// interface change (or with backoff),
/// as every stack does.
final class DatagramEstablishment: EstablishmentStrategy {
    private let core: ConnectionCore
    private let udp: UDP
    private let sockets: any DatagramSocketFactory
    private weak var race: ClientEstablishment?

    init(core: ConnectionCore, udp: UDP, sockets: any DatagramSocketFactory) {
        self.core = core
        self.udp = udp
        self.sockets = sockets
    }

    var ipVersion: IP.Version { udp.ip.version }

    func standIn(for race: ClientEstablishment, context: LoopContext) {
        self.race = race
        core.datagram.setStandIn(self)
    }

    func attempt(
        _ remote: SocketAddress, alone: Bool, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        // Under interface constraints, the socket is bound to the chosen interface.
        let sockets = try race.boundSockets(self.sockets, toward: remote)
        // Without a requested address, the route lookup: throws the no-route error for this address.
        let local = try race.requestedLocalAddress(toward: remote) ?? sockets.localAddress(toward: remote)
        let socket = try sockets.bind(local, batching: udp.batching, receiveSlots: 16, sendBatches: 16, reusePort: false)
        do {
            if let socket = socket as? UDPSocket {
                try socket.allowFragmentation()
                try socket.connect(to: remote)
            }
        } catch {
            socket.close()
            throw error
        }
        return (DatagramAttempt(transport: DatagramClientTransport(socket: socket, remote: remote)), true)
    }

    /// A Unix-domain datagram socket connected to the server's socket file: the connection at
    /// once, as a UDP socket is.
    func attempt(
        unixPath path: UnixSocketPath, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        let socket = try sockets.connect(toUnixPath: path)
        return (DatagramAttempt(transport: DatagramClientTransport(socket: socket, remote: UnixDatagramSocket.remote)), true)
    }

    /// UDP has no handshake to lose: a ready connection moves to another address with a new
    /// socket (`tryNextEndpoint()`, for a peer that does not answer).
    var movesWhenReady: Bool { true }

    func move(to remote: SocketAddress, race: ClientEstablishment, context: LoopContext) throws -> Bool {
        guard let transport = (try attempt(remote, alone: true, race: race, context: context).attempt as? DatagramAttempt)?.take()
        else { return false }
        // The channel takes the new socket in place of the old one, which closes.
        transport.start(core.datagram, context: context)
        return true
    }

    func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        race = nil
        guard let attempt = attempt as? DatagramAttempt, let transport = attempt.take() else { return }
        transport.start(core.datagram, context: context)
    }
}

extension DatagramEstablishment: ChannelStandIn {
    func release(_ context: LoopContext) {
        race?.abandon(context)
        race = nil
    }
}

/// A bound socket toward one address: nothing to wait for.
final class DatagramAttempt: EstablishmentAttempt {
    private var transport: DatagramClientTransport?

    init(transport: DatagramClientTransport) { self.transport = transport }

    func take() -> DatagramClientTransport? {
        defer { transport = nil }
        return transport
    }

    func abandon(_ context: LoopContext) {
        take()?.socket.close()
    }
}
