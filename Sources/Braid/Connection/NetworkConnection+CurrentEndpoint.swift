import BraidIO

extension NetworkConnection {
    /// The connection's path while it is ready (nil before), with its `localEndpoint` and
    /// `remoteEndpoint`. Once the connection watches its path (after `onPathUpdate`,
    /// `onViabilityUpdate` or `onBetterPathUpdate`), this is the path last reported, with
    /// its interface and whether it is still satisfied; otherwise a satisfied path with the
    /// endpoints and no interface list (working out the interface costs every connection a
    /// look at the kernel's interfaces, which most never need).
    ///
    /// ```swift
    /// if let path = connection.currentPath, let remote = path.remoteEndpoint {
    ///     print("talking to \(remote) over \(path.availableInterfaces.map(\.name))")
    /// }
    /// ```
    public var currentPath: NWPath? {
        let (watched, local, remote) = shared.snapshot.withLock { ($0.path, $0.localEndpoint, $0.remoteEndpoint) }
        if let watched { return watched }
        guard state == .ready, let local, let remote else { return nil }
        return NWPath(
            status: .satisfied, unsatisfiedDescription: nil, supportsIPv4: local.isIPv4, supportsIPv6: local.isIPv6,
            localEndpoint: local, remoteEndpoint: remote)
    }

    /// Gives up on the address being tried and moves to the next one the endpoint resolved
    /// to, at once, without waiting for Happy Eyeballs' next attempt or the attempt's
    /// timeout; with no address left, the connection goes to `waiting` (and retries as a
    /// waiting connection does). For a peer that does not answer on one of its addresses. A
    /// ready UDP connection, which had no handshake to tell whether the peer answers, moves to
    /// the next address (a new socket; with none left it stays); a ready TLS, TCP or QUIC
    /// connection stays where it is (an established stream cannot move to another address).
    /// While the connection is waiting this does nothing (`restart()` in the classic API
    /// retries).
    ///
    /// ```swift
    /// try await Task.sleep(for: .seconds(2))
    /// if connection.state != .ready { connection.tryNextEndpoint() }
    /// ```
    public func tryNextEndpoint() {
        loop.execute { [core] context in core.value.establishment?.tryNextEndpoint(context) }
    }
}

extension NWEndpoint {
    /// An IPv4 address (a connection's family, for its path).
    fileprivate var isIPv4: Bool {
        if case .hostPort(.ipv4, _) = self { true } else { false }
    }

    /// An IPv6 address.
    fileprivate var isIPv6: Bool {
        if case .hostPort(.ipv6, _) = self { true } else { false }
    }
}
