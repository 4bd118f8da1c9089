import BraidIO

/// TCP's part in establishment, TLS's too: each attempt is a nonblocking TCP connect, and it
/// wins when the connect completes (RFC 8305 races the transport). The winning socket goes to
/// the connection's byte-stream channel, with the stack's layer over it (TLS, whose handshake
/// the channel then runs).
final class StreamEstablishment: EstablishmentStrategy {
    private let core: ConnectionCore
    private let tcp: TCP
    /// What runs over the winning socket (nil: plain TCP).
    private let layering: (any ByteStreamLayering)?
    /// The endpoint the connection was asked for (TLS names it to the server).
    private let endpoint: NWEndpoint
    private let options: TCPOptions
    /// Where the attempts' sockets come from.
    private let sockets: any ByteStreamSocketFactory
    /// The race while it runs (kept alive by what it waits on).
    private weak var race: ClientEstablishment?

    init(
        core: ConnectionCore, tcp: TCP, layering: (any ByteStreamLayering)?, endpoint: NWEndpoint,
        serviceClass: NWParameters.ServiceClass, multipath: NWParameters.MultipathServiceType,
        sockets: any ByteStreamSocketFactory
    ) {
        self.core = core
        self.sockets = sockets
        self.tcp = tcp
        self.layering = layering
        self.endpoint = endpoint
        options = TCPOptions(tcp, serviceClass: serviceClass, multipath: multipath)
    }

    var ipVersion: IP.Version { tcp.ip.version }

    func standIn(for race: ClientEstablishment, context: LoopContext) {
        self.race = race
        core.byteStream.setStandIn(self)
    }

    func attempt(
        _ remote: SocketAddress, alone: Bool, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        let local = race.requestedLocalAddress(toward: remote)
        var options = options
        // Under interface constraints, the socket is bound to the chosen interface.
        options.device = race.interface(toward: remote)?.name
        let socket = try sockets.connect(to: remote, from: local, options: options)
        let attempt = ConnectAttempt(socket: socket, remote: remote, race: race)
        if socket.connectDeferredUntilWrite {
            // Fast open with a cookie: nothing is sent until the first write (with TLS, the
            // ClientHello rides in the SYN), so there is nothing to race.
            return (attempt, true)
        }
        do {
            try attempt.start(context, timeout: options.connectionTimeout)
        } catch {
            socket.close()
            throw error
        }
        return (attempt, false)
    }

    /// A Unix-domain connect, which completes at once (or throws): the attempt only waits for
    /// the socket to show writable, as a TCP connect's does.
    func attempt(
        unixPath path: UnixSocketPath, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        let socket = try sockets.connect(toUnixPath: path)
        let attempt = ConnectAttempt(socket: socket, remote: .unspecified, race: race)
        do {
            try attempt.start(context, timeout: nil)
        } catch {
            socket.close()
            throw error
        }
        return (attempt, false)
    }

    /// The connect that won: its socket goes to the channel, with the stack's layer over it.
    func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        race = nil
        guard let attempt = attempt as? ConnectAttempt, let socket = attempt.takeSocket(context) else { return }
        let channel = core.byteStream
        var layer: (any ByteStreamLayer)?
        if let layering {
            do {
                layer = try layering.clientLayer(endpoint: endpoint, remote: attempt.remote)
            } catch {
                socket.close()
                channel.fail(error, context: context)
                return
            }
        }
        core.shared.byteStream?.adopt(layer)
        channel.attach(socket: socket, layer: layer, context: context)
    }
}

/// Until a connect wins, the establishment stands in for the channel's socket: ending the
/// connection abandons the attempts.
extension StreamEstablishment: ChannelStandIn {
    func release(_ context: LoopContext) {
        race?.abandon(context)
        race = nil
    }
}

/// One nonblocking TCP connect: told when the socket becomes writable (connected, or failed)
/// and when its connection timeout passes.
final class ConnectAttempt: EstablishmentAttempt, LoopHandler {
    private var socket: (any ByteStreamSocket)?
    let remote: SocketAddress
    /// The race this attempt reports to (it keeps the race alive while it is in flight).
    private var race: ClientEstablishment?
    private var token: UInt64?
    private var timeout: Duration?

    init(socket: any ByteStreamSocket, remote: SocketAddress, race: ClientEstablishment) {
        self.socket = socket
        self.remote = remote
        self.race = race
    }

    func start(_ context: LoopContext, timeout: Duration?) throws {
        guard let socket else { return }
        let token = try socket.register(self, in: context)
        self.token = token
        self.timeout = timeout
        socket.setWantsWritable(true)
        if let timeout { context.setTimer(token, at: context.now + timeout) }
    }

    /// Hands the connected socket over; its next handler takes over its registration.
    func takeSocket(_ context: LoopContext) -> (any ByteStreamSocket)? {
        if let token { context.setTimer(token, at: nil) }
        token = nil
        race = nil
        socket?.setWantsWritable(false)
        defer { socket = nil }
        return socket
    }

    func abandon(_ context: LoopContext) {
        takeSocket(context)?.close()
    }

    func writable(_ context: LoopContext) {
        guard let socket, let race else { return }
        do {
            try socket.finishConnect()
            socket.setWantsWritable(false)
            race.attemptSucceeded(self, context: context)
        } catch {
            fail(NetworkError(error, endpoint: NWEndpoint(remote).description), context: context)
        }
    }

    func readable(_ context: LoopContext) {
        // An error before the connect completes shows as readable too (EPOLLERR).
        writable(context)
    }

    func timerFired(_ context: LoopContext) {
        fail(.noResponse(endpoint: NWEndpoint(remote).description, timeout: timeout ?? .zero), context: context)
    }

    func close(_ context: LoopContext) {
        abandon(context)
    }

    private func fail(_ error: NetworkError, context: LoopContext) {
        guard let race else { return }
        abandon(context)
        race.attemptFailed(self, error: error, context: context)
    }
}
