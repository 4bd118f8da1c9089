import BraidIO

extension NetworkConnection {
    /// Calls `handler` with `false` when the connection's path goes away (the link that holds
    /// its local address goes down or loses carrier) and with `true` when it returns. The
    /// connection is not torn down meanwhile: keep it, and send again once it is viable.
    /// A connection is viable when it becomes ready; only changes are reported. On a loop that
    /// cannot watch the kernel's interfaces (a virtual loop, or rtnetlink refused), nothing is
    /// reported.
    ///
    /// ```swift
    /// connection.onViabilityUpdate { connection, isViable in
    ///     print(isViable ? "the path is back" : "no path for now; keeping the connection")
    /// }
    /// ```
    public func onViabilityUpdate(_ handler: @escaping @Sendable (NetworkConnection, Bool) -> Void) {
        let watch = ViabilityWatch(connection: self, handler: handler)
        loop.execute { context in watch.arm(context) }
    }
}

/// One `onViabilityUpdate` registration: on the connection's loop, after each change of the
/// kernel's interfaces, compares the connection's local address with the interfaces and calls
/// the handler when the answer changes. Ends when the connection does.
private final class ViabilityWatch<ApplicationProtocol: NetworkProtocol>: @unchecked Sendable {
    // Unchecked: created off the loop, then used only on the connection's loop.
    private weak var connection: NetworkConnection<ApplicationProtocol>?
    private let handler: @Sendable (NetworkConnection<ApplicationProtocol>, Bool) -> Void
    private var viable = true

    init(connection: NetworkConnection<ApplicationProtocol>, handler: @escaping @Sendable (NetworkConnection<ApplicationProtocol>, Bool) -> Void) {
        self.connection = connection
        self.handler = handler
    }

    func arm(_ context: LoopContext) {
        guard let changes = InterfaceChanges.on(context), changes.isWatching else { return }
        _ = changes.whenChanged { [self] context in
            guard let connection else { return }
            switch connection.state {
            case .cancelled, .failed: return  // the connection has ended: so does the watch
            default: evaluate(connection, changes)
            }
            arm(context)
        }
    }

    private func evaluate(_ connection: NetworkConnection<ApplicationProtocol>, _ changes: InterfaceChanges) {
        guard connection.state == .ready, let endpoint = connection.localEndpoint,
            let local = Resolver.literalAddresses(for: endpoint)?.first, let snapshot = changes.snapshot
        else { return }
        let now = PathViability.isViable(local: local, in: snapshot)
        guard now != viable else { return }
        viable = now
        handler(connection, now)
    }
}
