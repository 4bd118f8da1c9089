import BraidCore
import BraidIO
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Takes a client connection from an endpoint to an established transport, on the
/// connection's loop, for every stack alike (the stack's `EstablishmentStrategy` makes and
/// adopts the attempts):
///
/// - resolves the name (off the loop);
/// - races the addresses with Happy Eyeballs (RFC 8305): IPv6 and IPv4 interleaved, a new
///   attempt every 250 ms while earlier ones are still in flight, the first to succeed wins
///   (QUIC: its handshake; TCP: its connect);
/// - while no address is usable (temporary DNS failure, no route), moves the connection to
///   `waiting(error)` and tries again as soon as the kernel's links, addresses or routes
///   change (`InterfaceChanges`, rtnetlink events on the connection's loop), with a backoff
///   timer as the fallback, until it works or is cancelled;
/// - under interface constraints (`NetworkParameters.expensivePathsProhibited` and the
///   others), chooses an allowed interface for each address (`InterfaceConstraints`) from the
///   loop's view of the kernel's interfaces, and the strategy binds the attempt's sockets to
///   it; with none allowed, the connection waits with `NetworkError.noAllowedInterface`.
///
/// An attempt the strategy commits to at once (QUIC resuming with 0-RTT data) does not race:
/// it is the connection from the start, so early data is sent once, on one path; later
/// addresses are tried only when an address has no route at all. Neither does a connection
/// with a fixed local port.
final class ClientEstablishment {
    /// RFC 8305 §5's recommended Connection Attempt Delay.
    static let attemptDelay: Duration = .milliseconds(250)
    /// Waits between rounds while no path is usable and nothing changes in the kernel's
    /// interfaces (a change retries at once).
    static let retryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(15), .seconds(30)]

    /// Where to send from (`NetworkParameters.localEndpoint`): an address or a port or both.
    typealias LocalBinding = (address: SocketAddress?, port: UInt16)

    private let core: ConnectionCore
    private let strategy: any EstablishmentStrategy
    private let endpoint: NWEndpoint
    let local: LocalBinding?
    /// The parameters' interface constraints (empty: the kernel's routing decides).
    private let constraints: InterfaceConstraints
    /// The interface chosen for each address tried under constraints (its sockets are bound
    /// to it).
    private var chosenInterfaces: [SocketAddress: NWInterface] = [:]
    /// Addresses not tried yet in this round, in attempt order.
    private var untried: [SocketAddress] = []
    /// Attempts in flight (several may race).
    private var attempts: [any EstablishmentAttempt] = []
    /// Why each attempt of this round failed.
    private var failures: [NetworkError] = []
    private var rounds = 0
    private var timer: UInt64?
    private var finished = false
    /// `InterfaceChanges.generation` when the round began (nil: the loop had no signal yet).
    private var roundGeneration: UInt64?
    /// While waiting: the signal that retries at the next interface change.
    private var pathWaiter: (changes: InterfaceChanges, token: UInt64)?

    init(
        core: ConnectionCore, strategy: any EstablishmentStrategy, endpoint: NWEndpoint, local: NWEndpoint? = nil,
        constraints: InterfaceConstraints = InterfaceConstraints()
    ) {
        self.core = core
        self.constraints = constraints
        self.strategy = strategy
        self.endpoint = endpoint
        self.local = local.map { endpoint in
            let port = endpoint.port.rawValue
            switch endpoint.host {
            case .ipv4(let address): return (SocketAddress(ip: address.description, port: port), port)
            case .ipv6(let address): return (SocketAddress(ip: address.description, port: port), port)
            case .name: return (nil, port)
            }
        }
    }

    /// Starts a round: resolve, then attempt. Call on the core's loop.
    func begin(_ context: LoopContext) {
        guard !isOver else { return }
        // Until an attempt wins, ending the connection abandons the attempts.
        strategy.standIn(for: self, context: context)
        if case .unix = endpoint {
            beginUnixDomain(context)
            return
        }
        if !constraints.isEmpty {
            // Choosing an interface needs the loop's view of the kernel's interfaces.
            guard let changes = InterfaceChanges.on(context), changes.isWatching else {
                finish(
                    failing: .unsupported(
                        "interface parameters (requiredInterfaceType, prohibitedInterfaceTypes, requiredInterface, prohibitedInterfaces, expensivePathsProhibited, constrainedPathsProhibited) on a loop that cannot watch the kernel's interfaces over rtnetlink (a virtual loop, or netlink refused)"
                    ), context: context)
                return
            }
            guard changes.snapshot != nil else {
                // The loop's watcher has not read the interfaces yet: begin once it has (or
                // once it failed, which the check above then reports).
                let token = changes.whenChanged { [self] context in
                    pathWaiter = nil
                    begin(context)
                }
                pathWaiter = (changes, token)
                return
            }
        }
        roundGeneration = InterfaceChanges.on(context, creating: false)?.generation
        let endpoint = endpoint, version = strategy.ipVersion, loop = context.loop
        if let literal = Resolver.literalAddresses(for: endpoint) ?? Resolver.fixedAddressesForTesting(for: endpoint) {
            // An IP literal needs no lookup: no thread hop before the first packet.
            resolved(Result { try Self.usable(literal, for: endpoint, version: version) }.mapError { NetworkError($0) }, context: context)
            return
        }
        let this = LoopBound(self, on: loop)
        Task {
            let result = await DiscoveryRuntime.$establishmentLoop.withValue(loop) {
                await ClientEstablishment.resolve(endpoint, version: version)
            }
            loop.execute { context in this.value.resolved(result, context: context) }
        }
    }

    private var isOver: Bool { finished || core.finalError != nil }

    /// A Unix-domain endpoint: one socket file, nothing to resolve, race or wait for. Its
    /// connect succeeds or fails at once, and a failure (no socket file: ENOENT; nobody
    /// listening: ECONNREFUSED) fails the connection, as a refused TCP connect does.
    private func beginUnixDomain(_ context: LoopContext) {
        do {
            guard local == nil, constraints.isEmpty else {
                throw NetworkError.invalidConfiguration(
                    "a Unix-domain endpoint (\(endpoint)) takes no local endpoint and no interface parameters: remove them")
            }
            guard let path = try endpoint.unixSocketPath else { return }
            let (attempt, committed) = try strategy.attempt(unixPath: path, race: self, context: context)
            if committed {
                adopt(attempt, context: context)
            } else {
                attempts.append(attempt)
            }
        } catch {
            finish(failing: NetworkError(error, endpoint: endpoint.description), context: context)
        }
    }

    private func resolved(_ result: Result<[SocketAddress], NetworkError>, context: LoopContext) {
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

    /// Starts the next address and schedules the one after it in case this one is slow.
    private func attemptNext(_ context: LoopContext) {
        cancelTimer(context)
        guard !isOver else { return }
        guard !untried.isEmpty else {
            if attempts.isEmpty { roundFailed(context) }
            return
        }
        let remote = untried.removeFirst()
        do {
            // The route lookup fails first when there is no path to this address.
            try Self.checkRoute(to: remote)
            if !constraints.isEmpty { try chooseInterface(toward: remote, context: context) }
            let (attempt, committed) = try strategy.attempt(remote, alone: attempts.isEmpty, race: self, context: context)
            if committed {
                adopt(attempt, context: context)
                return
            }
            attempts.append(attempt)
            // With a fixed local port, attempts go one at a time (they cannot share the port).
            if !untried.isEmpty, local == nil || local?.port == 0 {
                let delay = Self.attemptDelaysForTesting.withLock { $0[remote.port] } ?? Self.attemptDelay
                timer = context.schedule(at: context.now + delay) { [self] context in
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

    /// The interface the constraints allow toward `remote`, for the strategy's sockets
    /// (`interface(toward:)`); throws `noAllowedInterface` (a path failure: the connection
    /// waits) when there is none.
    private func chooseInterface(toward remote: SocketAddress, context: LoopContext) throws {
        guard let snapshot = InterfaceChanges.on(context, creating: false)?.snapshot else {
            throw NetworkError.noAllowedInterface(reason: "the kernel's interface list is being read again")
        }
        // The kernel's own choice, unconstrained, goes first when it is allowed.
        let kernelSource = try? UDPSocket.localAddress(toward: remote)
        switch constraints.choose(toward: remote, in: snapshot, marks: NetworkInterfacePolicy.current, kernelSource: kernelSource) {
        case .interface(let interface): chosenInterfaces[remote] = interface
        case .none(let reason): throw NetworkError.noAllowedInterface(reason: reason)
        }
    }

    /// The interface an attempt toward `remote` must bind its sockets to (nil: any).
    func interface(toward remote: SocketAddress) -> NWInterface? {
        chosenInterfaces[remote]
    }

    /// Where the parameters ask an attempt toward `remote` to bind (a port alone: the wildcard
    /// address of `remote`'s family); nil when they ask for nothing.
    func requestedLocalAddress(toward remote: SocketAddress) -> SocketAddress? {
        local.map { local in (local.address ?? SocketAddress(ip: remote.isIPv6 ? "::" : "0.0.0.0", port: 0)!).withPort(local.port) }
    }

    /// `sockets`, bound to the interface chosen toward `remote` under interface constraints
    /// (every socket of the connection, a migration's too), or as they are without constraints.
    func boundSockets(_ sockets: any DatagramSocketFactory, toward remote: SocketAddress) throws -> any DatagramSocketFactory {
        try interface(toward: remote).map { try sockets.boundToDevice($0.name) } ?? sockets
    }

    // MARK: What attempts report

    /// `attempt` succeeded: it becomes the connection, unless the connection ended meanwhile.
    func attemptSucceeded(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        guard !isOver, attempts.contains(where: { $0 === attempt }) else { return }
        adopt(attempt, context: context)
    }

    /// `attempt` failed with `error`: the next address goes at once when nothing else is in
    /// flight.
    func attemptFailed(_ attempt: any EstablishmentAttempt, error: NetworkError, context: LoopContext) {
        guard attempts.contains(where: { $0 === attempt }) else { return }
        attempts.removeAll { $0 === attempt }
        failures.append(error)
        if !isOver, attempts.isEmpty { attemptNext(context) }
    }

    /// Hands `attempt` to the strategy, which makes it the connection, and abandons the others.
    private func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext) {
        finished = true
        cancelTimer(context)
        for loser in attempts where loser !== attempt { loser.abandon(context) }
        attempts.removeAll()
        // A connection that can move later keeps its addresses (and this race) until it ends.
        if strategy.movesWhenReady { core.establishmentAfterReady = self }
        strategy.adopt(attempt, context: context)
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
        let delays = Self.retryDelaysForTesting.withLock { $0[endpoint.port.rawValue] } ?? Self.retryDelays
        var retryAt = context.now + delays[min(rounds, delays.count - 1)]
        rounds += 1
        // The path wakes the connection: the kernel's next link, address or route event
        // retries at once (about a millisecond after the change), and the timer is only the
        // fallback where netlink is refused.
        if let changes = InterfaceChanges.on(context), changes.isWatching {
            if let seen = roundGeneration, seen != changes.generation {
                // Something changed while this round ran: it may have missed it.
                retryAt = context.now
            } else {
                let token = changes.whenChanged { [weak self] context in self?.pathChanged(context) }
                pathWaiter = (changes, token)
            }
        }
        timer = context.schedule(at: retryAt) { [self] context in
            timer = nil
            retry(context)
        }
    }

    /// Retries at once if the connection is waiting (`NWConnection.restart()`); does nothing
    /// while attempts are in flight or once the race is over.
    func retryNow(_ context: LoopContext) {
        guard !isOver, attempts.isEmpty, timer != nil || pathWaiter != nil else { return }
        retry(context)
    }

    /// `tryNextEndpoint()`: gives up on the attempts in flight and tries the next address at
    /// once; with no address left, the connection waits (and retries, as after any round
    /// that found no path). Does nothing while waiting or once an attempt has won: an
    /// established byte stream cannot move to another address.
    func tryNextEndpoint(_ context: LoopContext) {
        if finished, core.finalError == nil {
            moveToNextAddress(context)
            return
        }
        guard !isOver, !attempts.isEmpty else { return }
        cancelTimer(context)
        let abandoned = attempts
        attempts.removeAll()
        for attempt in abandoned { attempt.abandon(context) }
        guard untried.isEmpty else {
            attemptNext(context)
            return
        }
        wait(
            failures.last ?? .system(call: "connect(\(endpoint)): the application abandoned the last address (tryNextEndpoint)", errno: ECANCELED),
            context: context)
    }

    /// After ready, for a stack whose connection can move (UDP, which has no handshake: a
    /// socket toward the next address): the next address not tried that has a route; with
    /// none left, the connection stays where it is.
    private func moveToNextAddress(_ context: LoopContext) {
        while !untried.isEmpty {
            let remote = untried.removeFirst()
            do {
                try Self.checkRoute(to: remote)
                _ = try strategy.move(to: remote, race: self, context: context)
                return
            } catch {
                // No route to this one (or no socket for it): the next.
                continue
            }
        }
    }

    /// An interface changed while waiting: retry now instead of at the timer.
    private func pathChanged(_ context: LoopContext) {
        pathWaiter = nil
        cancelTimer(context)
        retry(context)
    }

    private func retry(_ context: LoopContext) {
        cancelTimer(context)
        guard !isOver else { return }
        core.shared.states.update(.preparing)
        begin(context)
    }

    private func finish(failing error: NetworkError, context: LoopContext) {
        abandon(context)
        core.fail(error)
    }

    /// The connection was cancelled or failed before any attempt won.
    func abandon(_ context: LoopContext) {
        finished = true
        cancelTimer(context)
        for attempt in attempts { attempt.abandon(context) }
        attempts.removeAll()
    }

    private func cancelTimer(_ context: LoopContext) {
        if let timer { context.deregister(timer) }
        timer = nil
        if let pathWaiter { pathWaiter.changes.cancel(pathWaiter.token) }
        pathWaiter = nil
    }

    // MARK: Addresses

    private static func resolve(_ endpoint: NWEndpoint, version: IP.Version) async -> Result<[SocketAddress], NetworkError> {
        do {
            return .success(try await addresses(for: endpoint, version: version))
        } catch {
            return .failure(NetworkError(error))
        }
    }

    static func addresses(for endpoint: NWEndpoint, version: IP.Version) async throws -> [SocketAddress] {
        try usable(try await Resolver.addresses(for: endpoint), for: endpoint, version: version)
    }

    /// The addresses of the IP version the stack asks for; throws if none is left.
    static func usable(_ all: [SocketAddress], for endpoint: NWEndpoint, version: IP.Version) throws -> [SocketAddress] {
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
    static func happyEyeballsOrder(_ addresses: [SocketAddress]) -> [SocketAddress] {
        guard let first = addresses.first else { return [] }
        var preferred = addresses.filter { $0.isIPv6 == first.isIPv6 }[...]
        var other = addresses.filter { $0.isIPv6 != first.isIPv6 }[...]
        var ordered: [SocketAddress] = []
        while !preferred.isEmpty || !other.isEmpty {
            if let next = preferred.popFirst() { ordered.append(next) }
            if let next = other.popFirst() { ordered.append(next) }
        }
        return ordered
    }

    /// Errors that mean "no usable path to this address now", as opposed to a peer that
    /// answered wrongly: no route, network down, the local address gone.
    static func isPathFailure(_ error: NetworkError) -> Bool {
        if case .noAllowedInterface = error { return true }
        guard case .system(_, let code) = error else { return false }
        // ENODEV: the interface chosen for the connection went away before its socket was bound.
        return [ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN, EADDRNOTAVAIL, ENODEV].contains(code)
    }

    /// Tests give the connections to a port their own retry delays (say, an hour, to show
    /// that an interface change and not the timer ended a wait).
    static let retryDelaysForTesting = Locked<[UInt16: [Duration]]>([:])

    /// Tests hold back Happy Eyeballs' next attempt toward a port (say, for an hour, to show
    /// that `tryNextEndpoint()` and not the race moved the connection on).
    static let attemptDelaysForTesting = Locked<[UInt16: Duration]>([:])

    /// Tests make a port look unroutable for a number of attempts (the errno and how many),
    /// to drive the waiting state without changing the machine's routes.
    static let routeFailuresForTesting = Locked<[UInt16: (errno: Int32, remaining: Int)]>([:])

    private static func checkRoute(to remote: SocketAddress) throws {
        try routeFailuresForTesting.withLock { failures in
            guard let failure = failures[remote.port], failure.remaining > 0 else { return }
            failures[remote.port]?.remaining -= 1
            throw DatapathError.system("connect(\(remote))", failure.errno)
        }
    }
}

/// What one stack contributes to `ClientEstablishment`: how to attempt one address, and
/// what becomes of the attempt that wins.
protocol EstablishmentStrategy: AnyObject {
    /// The address family the stack asks for.
    var ipVersion: IP.Version { get }
    /// A round begins: stand the race in for the connection's transport, so that ending the
    /// connection abandons the attempts (`ClientEstablishment.abandon`).
    func standIn(for race: ClientEstablishment, context: LoopContext)
    /// Starts an attempt on `remote` (`alone`: no other attempt is in flight), which reports
    /// to `race`. `committed` means the attempt is the connection from the start (it may
    /// carry early data) and does not race. Throws if the address cannot be tried at all.
    func attempt(
        _ remote: SocketAddress, alone: Bool, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool)
    /// `attempt` won: make it the connection.
    func adopt(_ attempt: any EstablishmentAttempt, context: LoopContext)
    /// The ready connection can move to another address (`tryNextEndpoint()` after ready).
    var movesWhenReady: Bool { get }
    /// Moves the ready connection to `remote`; false when the stack cannot.
    func move(to remote: SocketAddress, race: ClientEstablishment, context: LoopContext) throws -> Bool
    /// Starts the one attempt on the Unix-domain socket at `path`, which reports to `race`
    /// (`committed`: it is the connection at once, as a UDP attempt is).
    func attempt(
        unixPath path: UnixSocketPath, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool)
}

extension EstablishmentStrategy {
    /// An established byte stream or QUIC connection stays on its address.
    var movesWhenReady: Bool { false }

    func move(to remote: SocketAddress, race: ClientEstablishment, context: LoopContext) throws -> Bool { false }

    /// QUIC, which runs over IP alone, has no Unix-domain attempt.
    func attempt(
        unixPath path: UnixSocketPath, race: ClientEstablishment, context: LoopContext
    ) throws -> (attempt: any EstablishmentAttempt, committed: Bool) {
        throw NetworkError.unsupported("Unix-domain endpoints (.unix(path:)) on this stack: TCP(), TLS() and UDP() connect to them")
    }
}

/// One connection attempt to one address, made by an `EstablishmentStrategy`.
protocol EstablishmentAttempt: AnyObject {
    /// Stops the attempt: it lost the race, or the connection ended first.
    func abandon(_ context: LoopContext)
}
