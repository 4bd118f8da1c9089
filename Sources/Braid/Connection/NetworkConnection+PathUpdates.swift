import BraidIO

extension NetworkConnection {
    /// Calls `handler` with the connection's path once it is ready, and again whenever the
    /// path changes: its interface (a QUIC client that moved to another one), whether it is
    /// satisfied (viable), and its endpoints (`localEndpoint` changes with a migration). The
    /// path's `availableInterfaces` holds the one interface the connection uses. On a loop that
    /// cannot watch the kernel's interfaces (a virtual loop, or rtnetlink refused), nothing
    /// is reported.
    ///
    /// ```swift
    /// connection.onPathUpdate { connection, path in
    ///     print("now over \(path.availableInterfaces.map(\.name)), from \(path.localEndpoint.map { "\($0)" } ?? "?")")
    /// }
    /// ```
    @discardableResult
    public func onPathUpdate(_ handler: @escaping @Sendable (NetworkConnection, NWPath) -> Void) -> NetworkConnection {
        registerWithPathWatch(handler) { $0.onPathUpdate($1, context: $2) }
        return self
    }

    /// Calls `handler` with `false` when the connection's path goes away (the link that holds
    /// its local address goes down or loses carrier, or the address is removed) and with
    /// `true` when it returns. The connection is not torn down meanwhile: keep it, and send
    /// again once it is viable. A QUIC client connection does not wait: it moves to another
    /// interface its parameters allow, if there is one, and stays viable. A connection is
    /// viable when it becomes ready; only changes are reported. On a loop that cannot watch
    /// the kernel's interfaces (a virtual loop, or rtnetlink refused), nothing is reported.
    ///
    /// ```swift
    /// connection.onViabilityUpdate { connection, isViable in
    ///     print(isViable ? "the path is back" : "no path for now; keeping the connection")
    /// }
    /// ```
    @discardableResult
    public func onViabilityUpdate(_ handler: @escaping @Sendable (NetworkConnection, Bool) -> Void) -> NetworkConnection {
        registerWithPathWatch(handler) { $0.onViabilityUpdate($1, context: $2) }
        return self
    }

    /// Calls `handler` with `true` when a better path than the ready connection's becomes
    /// available, and with `false` when it is gone again. Better means an interface the
    /// connection's parameters allow, that can reach the peer, and that is inexpensive where
    /// the current one is expensive, unconstrained where it is constrained, or else of a
    /// preferred type: wired Ethernet over Wi-Fi over other over cellular. An interface that
    /// can carry the connection is also better than a path that went away. The connection
    /// itself stays where it is: to use the better path, start a new connection and move the
    /// work over. Only changes are reported (none while no better path appears).
    ///
    /// ```swift
    /// connection.onBetterPathUpdate { connection, betterPathAvailable in
    ///     if betterPathAvailable { print("a better path exists: reconnect when convenient") }
    /// }
    /// ```
    @discardableResult
    public func onBetterPathUpdate(_ handler: @escaping @Sendable (NetworkConnection, Bool) -> Void) -> NetworkConnection {
        registerWithPathWatch(handler) { $0.onBetterPathUpdate($1, context: $2) }
        return self
    }

    /// Hands `handler`, bound to this connection (weakly: the watch must not keep it alive),
    /// to the connection's path watch on its loop, through `register`.
    private func registerWithPathWatch<Update>(
        _ handler: @escaping @Sendable (NetworkConnection, Update) -> Void,
        _ register: @escaping @Sendable (ConnectionPathWatch, @escaping (Update) -> Void, LoopContext) -> Void
    ) {
        let core = core, constraints = parameters.interfaceConstraints
        loop.execute { [weak self] context in
            register(core.value.pathWatch(constraints: constraints), { [weak self] update in
                guard let self else { return }
                handler(self, update)
            }, context)
        }
    }
}
