import BraidIO
import BraidQUIC
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Takes a client connection from an endpoint to a completed handshake, on the connection's
/// loop:
///
/// - resolves the name (off the loop);
/// - races the addresses with Happy Eyeballs (RFC 8305): IPv6 and IPv4 interleaved, a new
///   attempt every 250 ms while earlier ones are still in flight, the first handshake wins;
/// - while no address is usable (temporary DNS failure, no route), moves the connection to
///   `waiting(error)` and tries again with backoff until it works or is cancelled.
///
/// A resumed connection (a session ticket is cached) does not race: its one 0-RTT attempt is
/// the connection from the start, so early data is sent once, on one path; later addresses are
/// tried only when an address has no route at all. Neither does a connection with a fixed
/// local port.
final class ClientEstablishment {
    /// RFC 8305 §5's recommended Connection Attempt Delay.
    static let attemptDelay: Duration = .milliseconds(250)
    /// Waits between rounds while no path is usable.
    static let retryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(15), .seconds(30)]

    private let core: ConnectionCore
    private let quic: QUIC
    private let endpoint: NWEndpoint
    /// Where to send from (`NetworkParameters.localEndpoint`): an address or a port or both.
    private let local: (address: QUICAddress?, port: UInt16)?
    private let serverName: String
    /// Addresses not tried yet in this round, in attempt order.
    private var untried: [QUICAddress] = []
    /// Handshakes in flight (without a ticket, several may race).
    private var attempts: [QUICClientDriver] = []
    /// Why each attempt of this round failed.
    private var failures: [NetworkError] = []
    private var rounds = 0
    private var timer: UInt64?
    private var finished = false
    /// The attempt handed to the channel. Events of the pass that adopted it still come here
    /// (the driver took its handler before the pass began): they go on to the channel.
    private weak var adopted: QUICClientDriver?

    /// Where the attempts' sockets come from.
    private let sockets: any DatagramSocketFactory

    init(core: ConnectionCore, quic: QUIC, endpoint: NWEndpoint, local: NWEndpoint? = nil, sockets: any DatagramSocketFactory) {
        self.core = core
        self.sockets = sockets
        self.quic = quic
        self.endpoint = endpoint
        self.local = local.map { endpoint in
            let port = endpoint.port.rawValue
            switch endpoint.host {
            case .ipv4(let address): return (QUICAddress(ip: address.description, port: port), port)
            case .ipv6(let address): return (QUICAddress(ip: address.description, port: port), port)
            case .name: return (nil, port)
            }
        }
        // A name, or the address literal (the engine sends no SNI for literals).
        serverName = quic.serverName ?? endpoint.host.description
    }

    /// Starts a round: resolve, then attempt. Call on the core's loop.
    func begin(_ context: LoopContext) {
        guard !isOver else { return }
        // Until an attempt wins, ending the connection abandons the attempts.
        core.channel.setTransport(self)
        let endpoint = endpoint, version = quic.udp.ip.version, loop = context.loop
        if let literal = Resolver.literalAddresses(for: endpoint) {
            // An IP literal needs no lookup: no thread hop before the first packet.
            resolved(Result { try Self.usable(literal, for: endpoint, version: version) }.mapError { NetworkError($0) }, context: context)
            return
        }
        let this = LoopBound(self, on: loop)
        Task {
            let result = await ClientEstablishment.resolve(endpoint, version: version)
            loop.execute { context in this.value.resolved(result, context: context) }
        }
    }

    private var isOver: Bool { finished || core.channel.finalError != nil }

    private func resolved(_ result: Result<[QUICAddress], NetworkError>, context: LoopContext) {
        guard !isOver else { return }
        switch result {
        case .success(var addresses):
            if let localAddress = local?.address {
                addresses.removeAll { $0.isIPv6 != localAddress.isIPv6 }
                guard !addresses.isEmpty else {
                    let family = localAddress.isIPv6 ? "IPv6" : "IPv4"
                    finish(failing: .invalidConfiguration("the local endpoint is \(family) but \(endpoint.host) has no \(family) address"), context: context)
                    return
                }
            }
            untried = Self.happyEyeballsOrder(addresses)
            failures = []
            attemptNext(context)
        case .failure(let error):
            if case .dnsFailure = error { wait(error, context: context) } else { finish(failing: error, context: context) }
        }
    }

    /// Starts the next address; without a ticket, schedules the one after it in case this
    /// one is slow.
    private func attemptNext(_ context: LoopContext) {
        cancelTimer(context)
        guard !isOver else { return }
        guard !untried.isEmpty else {
            if attempts.isEmpty { roundFailed(context) }
            return
        }
        let remote = untried.removeFirst()
        let cacheKey = "\(serverName):\(remote.port)"
        do {
            try Self.checkRoute(to: remote)
            // The route lookup fails first when there is no path to this address.
            let bindAddress = try (local?.address ?? sockets.localAddress(toward: remote)).withPort(local?.port ?? 0)
            // Taken (tickets are single-use) only once this address looks usable.
            let ticket = attempts.isEmpty ? quic.sessionCache?.take(cacheKey) : nil
            let client = try ClientContexts.context(for: quic)
            var driver: QUICClientDriver?
            let attempt = try QUICClientDriver(
                context: context, client: client, remote: remote, serverName: serverName, resumption: ticket,
                local: bindAddress, batching: quic.udp.batching, sockets: sockets
            ) { [self] _, event in
                // Before `init` returns, the driver's first service pass can report events too.
                guard let driver else { return }
                attemptEvent(event, driver: driver, context: context)
            }
            driver = attempt
            if ticket != nil {
                // 0-RTT: this attempt is the connection from the start.
                adopt(attempt, context: context)
                return
            }
            attempts.append(attempt)
            // With a fixed local port, attempts go one at a time (they cannot share the port).
            if !untried.isEmpty, local == nil || local?.port == 0 {
                timer = context.schedule(at: context.now + Self.attemptDelay) { [self] context in
                    timer = nil
                    attemptNext(context)
                }
            }
        } catch {
            let failure = NetworkError(error, endpoint: NWEndpoint(remote).description)
            guard Self.isPathFailure(failure) else {
                finish(failing: failure, context: context)
                return
            }
            // No route to this address: move on at once.
            failures.append(failure)
            attemptNext(context)
        }
    }

    private func attemptEvent(_ event: QUICEvent, driver: QUICClientDriver, context: LoopContext) {
        if driver === adopted {
            core.channel.handle(event, context: context)
            return
        }
        switch event {
        case .handshakeCompleted:
            guard !isOver else { return }
            adopt(driver, context: context)
            core.channel.handle(event, context: context)
        case .connectionClosed(let error):
            attempts.removeAll { $0 === driver }
            failures.append(
                NetworkError(
                    quic: error, endpoint: NWEndpoint(driver.connection.path.remote).description,
                    handshakeTimeout: quic.transport.handshakeTimeout))
            // A failed attempt hands over to the next address without waiting for the timer.
            if !isOver, attempts.isEmpty { attemptNext(context) }
        case .terminated:
            // The driver closes its socket itself once terminated; drop our last reference.
            driver.onEvent = { _, _ in }
        default:
            break
        }
    }

    /// Hands `driver` over to the connection's channel, which gets its events from now on,
    /// closes the other attempts, and steps aside.
    private func adopt(_ driver: QUICClientDriver, context: LoopContext) {
        finished = true
        cancelTimer(context)
        for loser in attempts where loser !== driver {
            loser.connection.close(applicationErrorCode: 0, reason: "", now: context.now)
            loser.service(context)
        }
        attempts.removeAll()
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
        channel.attach(driver.connection, transport: driver)
        driver.service(context)
    }

    /// Every address failed. With no route anywhere, wait and retry; otherwise report the most
    /// telling failure.
    private func roundFailed(_ context: LoopContext) {
        guard let first = failures.first else {
            finish(failing: .dnsNameNotFound(host: endpoint.host.description), context: context)
            return
        }
        if failures.allSatisfy(Self.isPathFailure) {
            wait(first, context: context)
            return
        }
        // A certificate or ALPN problem says more than another address's silence.
        let telling = failures.first { if case .noResponse = $0 { false } else { !Self.isPathFailure($0) } }
        finish(failing: telling ?? failures.first { !Self.isPathFailure($0) } ?? first, context: context)
    }

    private func wait(_ error: NetworkError, context: LoopContext) {
        core.shared.states.update(.waiting(error))
        let delay = Self.retryDelays[min(rounds, Self.retryDelays.count - 1)]
        rounds += 1
        timer = context.schedule(at: context.now + delay) { [self] context in
            timer = nil
            guard !isOver else { return }
            core.shared.states.update(.preparing)
            begin(context)
        }
    }

    private func finish(failing error: NetworkError, context: LoopContext) {
        abandon(context)
        core.fail(error)
    }

    /// The connection was cancelled or failed before any attempt won.
    fileprivate func abandon(_ context: LoopContext) {
        finished = true
        cancelTimer(context)
        for attempt in attempts {
            attempt.connection.close(applicationErrorCode: 0, reason: "", now: context.now)
            attempt.service(context)
        }
        attempts.removeAll()
    }

    private func cancelTimer(_ context: LoopContext) {
        if let timer { context.deregister(timer) }
        timer = nil
    }

    // MARK: Addresses

    private static func resolve(_ endpoint: NWEndpoint, version: IP.Version) async -> Result<[QUICAddress], NetworkError> {
        do {
            return .success(try await addresses(for: endpoint, version: version))
        } catch {
            return .failure(NetworkError(error))
        }
    }

    static func addresses(for endpoint: NWEndpoint, version: IP.Version) async throws -> [QUICAddress] {
        try usable(try await Resolver.addresses(for: endpoint), for: endpoint, version: version)
    }

    /// The addresses of the IP version the stack asks for; throws if none is left.
    static func usable(_ all: [QUICAddress], for endpoint: NWEndpoint, version: IP.Version) throws -> [QUICAddress] {
        let usable = all.filter {
            switch version {
            case .any: true
            case .v4: !$0.isIPv6
            case .v6: $0.isIPv6
            }
        }
        guard !usable.isEmpty else {
            throw NetworkError.dnsNameNotFound(host: "\(endpoint.host) (no \(version == .v4 ? "IPv4" : "IPv6") address)")
        }
        return usable
    }

    /// RFC 8305 §4: keep the resolver's preference order but alternate address families,
    /// starting with the family of the first (most preferred) address.
    static func happyEyeballsOrder(_ addresses: [QUICAddress]) -> [QUICAddress] {
        guard let first = addresses.first else { return [] }
        var preferred = addresses.filter { $0.isIPv6 == first.isIPv6 }[...]
        var other = addresses.filter { $0.isIPv6 != first.isIPv6 }[...]
        var ordered: [QUICAddress] = []
        while !preferred.isEmpty || !other.isEmpty {
            if let next = preferred.popFirst() { ordered.append(next) }
            if let next = other.popFirst() { ordered.append(next) }
        }
        return ordered
    }

    /// Errors that mean "no usable path to this address now", as opposed to a peer that
    /// answered wrongly: no route, network down, the local address gone.
    static func isPathFailure(_ error: NetworkError) -> Bool {
        guard case .system(_, let code) = error else { return false }
        return [ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN, EADDRNOTAVAIL].contains(code)
    }

    /// Tests make a port look unroutable for a number of attempts (the errno and how many),
    /// to drive the waiting state without changing the machine's routes.
    static let routeFailuresForTesting = Mutex<[UInt16: (errno: Int32, remaining: Int)]>([:])

    private static func checkRoute(to remote: QUICAddress) throws {
        try routeFailuresForTesting.withLock { failures in
            guard let failure = failures[remote.port], failure.remaining > 0 else { return }
            failures[remote.port]?.remaining -= 1
            throw DatapathError.system("connect(\(remote))", failure.errno)
        }
    }
}

/// Until an attempt wins, the establishment stands in for the connection's transport: ending
/// the connection abandons the attempts.
extension ClientEstablishment: QUICChannelTransport {
    func service(_ context: LoopContext) {}
    func release(_ context: LoopContext) { abandon(context) }
    var socketCounters: SocketCounters? { nil }
    func moveToNewPort(_ context: LoopContext) throws -> SocketAddress {
        throw NetworkError.invalidState("migrate once the connection is ready")
    }
}
