import BraidCore
import BraidIO
import Logging

/// One connection's watch over the kernel's interfaces, on its loop: when the connection
/// becomes ready and after each link, address or route change it works out the ready
/// connection's path, whether it is still viable, whether a better one is available, and (a
/// QUIC client) whether to move to another interface because its own went away. Made on the
/// first `onPathUpdate`, `onViabilityUpdate` or `onBetterPathUpdate`, or when a QUIC client
/// connection starts; ends with the connection. On a loop that cannot watch the
/// kernel's interfaces (a virtual loop, or rtnetlink refused) it does nothing.
final class ConnectionPathWatch {
    /// Weak: the waiter registered with the loop's `InterfaceChanges` holds the watch, and a
    /// core released before its end cancelled that waiter must not be touched.
    private weak var core: ConnectionCore?
    /// The connection's interface parameters: only interfaces they allow count as paths.
    private let constraints: InterfaceConstraints
    private var pathHandlers: [(NWPath) -> Void] = []
    private var viabilityHandlers: [(Bool) -> Void] = []
    private var betterPathHandlers: [(Bool) -> Void] = []
    /// Set for QUIC client connections: they migrate (RFC 9000 §9) to another allowed
    /// interface when theirs goes away.
    var migratesWhenPathGoesAway = false
    private var isArmed = false
    private var isStopped = false
    /// The registration with the loop's `InterfaceChanges` while one is pending.
    private var waiting: (changes: InterfaceChanges, token: UInt64)?
    private var viable = true
    private var betterPathAvailable = false
    /// The path last reported (nil: none yet).
    private var path: NWPath?
    /// The loop's interface-change signal, once armed.
    private var changes: InterfaceChanges?

    private static var logger: Logger { BraidLog.logger(label: "braid.path") }

    init(core: ConnectionCore, constraints: InterfaceConstraints) {
        self.core = core
        self.constraints = constraints
    }

    /// `handler` gets the path now (if the connection is ready and the interfaces are known),
    /// then every change.
    func onPathUpdate(_ handler: @escaping (NWPath) -> Void, context: LoopContext) {
        pathHandlers.append(handler)
        arm(context)
        if let path { handler(path) } else { evaluateNow() }
    }

    func onViabilityUpdate(_ handler: @escaping (Bool) -> Void, context: LoopContext) {
        viabilityHandlers.append(handler)
        arm(context)
    }

    func onBetterPathUpdate(_ handler: @escaping (Bool) -> Void, context: LoopContext) {
        betterPathHandlers.append(handler)
        arm(context)
    }

    /// Watches from now on (once).
    func arm(_ context: LoopContext) {
        guard !isArmed, !isStopped else { return }
        isArmed = true
        waitForChange(context)
    }

    /// Stops watching (the connection ended): the loop's `InterfaceChanges` lets go of the
    /// watch now, not at the next change, which may never come.
    func stop() {
        isStopped = true
        if let waiting { waiting.changes.cancel(waiting.token) }
        waiting = nil
    }

    /// Evaluates at once, without moving the connection (it has just become ready, or a path
    /// handler has just registered).
    func evaluateNow() {
        // Nobody to tell (a QUIC client's watch only moves it when a path goes away, which
        // only a change shows): the evaluation's snapshot and route lookup would be wasted on
        // every connection's handshake.
        guard !pathHandlers.isEmpty || !viabilityHandlers.isEmpty || !betterPathHandlers.isEmpty else { return }
        guard !isStopped, let core, let changes else { return }
        evaluate(core, changes, context: nil)
    }

    private func waitForChange(_ context: LoopContext) {
        guard !isStopped, let changes = InterfaceChanges.on(context), changes.isWatching else { return }
        self.changes = changes
        let token = changes.whenChanged { [self] context in
            waiting = nil
            guard let core else { return }
            switch core.shared.states.current {
            case .cancelled, .failed: return  // the connection has ended: so does the watch
            default: evaluate(core, changes, context: context)
            }
            waitForChange(context)
        }
        waiting = (changes, token)
    }

    /// `context` nil: report only, do not migrate.
    private func evaluate(_ core: ConnectionCore, _ changes: InterfaceChanges, context: LoopContext?) {
        guard core.shared.states.current == .ready, let snapshot = changes.snapshot else { return }
        let endpoints = core.shared.snapshot.withLock { ($0.localEndpoint, $0.remoteEndpoint) }
        guard var local = endpoints.0.flatMap({ Resolver.literalAddresses(for: $0)?.first }),
            let remote = endpoints.1.flatMap({ Resolver.literalAddresses(for: $0)?.first })
        else { return }
        var isViable = PathViability.isViable(local: local, in: snapshot)
        let marks = NetworkInterfacePolicy.current
        let allowed = constraints.allowedInterfaces(
            toward: remote, in: snapshot, marks: marks, kernelSource: try? UDPSocket.localAddress(toward: remote))
        var current = Self.interface(holding: local, in: snapshot)
        if !isViable, migratesWhenPathGoesAway, let context, let target = allowed.first(where: { $0.name != current?.name }) {
            do {
                local = try core.migrate(context: context, device: target.name)
                Self.logger.info("path to \(remote) went away: moved to \(target.name), from \(local)")
                current = target
                isViable = PathViability.isViable(local: local, in: snapshot)
            } catch {
                Self.logger.info("path to \(remote) went away; cannot move to \(target.name): \(error)")
            }
        }
        let now = Self.path(local: local, remote: remote, on: current, isViable: isViable, marks: marks)
        if now != path {
            path = now
            core.shared.snapshot.withLock { $0.path = now }
            for handler in pathHandlers { handler(now) }
        }
        if isViable != viable {
            viable = isViable
            for handler in viabilityHandlers { handler(isViable) }
        }
        let better = allowed.contains { candidate in
            candidate.name != current?.name && (!isViable || current.map { Self.prefers(candidate, over: $0, marks: marks) } ?? true)
        }
        if better != betterPathAvailable {
            betterPathAvailable = better
            for handler in betterPathHandlers { handler(better) }
        }
    }

    /// A connection's path: satisfied over the interface that holds its local address while
    /// that is viable, else unsatisfied with why; its endpoints either way.
    private static func path(
        local: SocketAddress, remote: SocketAddress, on interface: NWInterface?, isViable: Bool, marks: NetworkInterfacePolicy.Marks
    ) -> NWPath {
        let endpoints = (local: NWEndpoint(local), remote: NWEndpoint(remote))
        guard isViable, let interface else {
            let why = interface.map { "\($0.name), which holds \(local.ipString), is down" } ?? "\(local.ipString) is no longer on any interface"
            return NWPath(status: .unsatisfied, unsatisfiedDescription: why, localEndpoint: endpoints.local, remoteEndpoint: endpoints.remote)
        }
        return NWPath(
            status: .satisfied, unsatisfiedDescription: nil, availableInterfaces: [interface],
            isExpensive: interface.type == .cellular || marks.isExpensive(interface.name), isConstrained: marks.isConstrained(interface.name),
            supportsIPv4: !local.isIPv6, supportsIPv6: local.isIPv6, localEndpoint: endpoints.local, remoteEndpoint: endpoints.remote)
    }

    /// The interface that holds `local`'s address (nil: the address is gone).
    private static func interface(holding local: SocketAddress, in snapshot: InterfaceSnapshot) -> NWInterface? {
        let bytes = InterfaceConstraints.bytes(of: local)
        return snapshot.interfaces.first { $0.addresses.contains { $0.bytes == bytes } }.map(PathEvaluation.publicInterface)
    }

    /// Whether `candidate` is a better path than `current`: inexpensive over expensive,
    /// unconstrained over constrained, then wired over Wi-Fi over other over cellular.
    static func prefers(_ candidate: NWInterface, over current: NWInterface, marks: NetworkInterfacePolicy.Marks) -> Bool {
        func rank(_ interface: NWInterface) -> (Int, Int, Int) {
            let expensive = interface.type == .cellular || marks.isExpensive(interface.name)
            let order: [NWInterface.InterfaceType] = [.loopback, .wiredEthernet, .wifi, .other, .cellular]
            return (expensive ? 1 : 0, marks.isConstrained(interface.name) ? 1 : 0, order.firstIndex(of: interface.type) ?? order.count)
        }
        return rank(candidate) < rank(current)
    }
}
