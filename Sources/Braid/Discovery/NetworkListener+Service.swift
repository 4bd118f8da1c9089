import BraidCore

/// A `NetworkListener`'s DNS-SD advertisement: the service, the application's handler, the
/// advertiser while running, and the failure that ended `run` (a name taken under
/// `noAutoRename`).
struct ListenerServiceState: Sendable {
    var service: NWListener.Service?
    var handler: (@Sendable (NWListener.ServiceRegistrationChange) -> Void)?
    var advertiser: ServiceAdvertiser?
    var failure: NetworkError?
    /// Ends `run` (its intake) while it runs.
    var endRun: (@Sendable () -> Void)?
}

extension NetworkListener {
    /// A change in the listener's advertisement: `add` with the `.service` endpoint advertised
    /// (its name may be "Name (2)" after a conflict), `remove` when it no longer is.
    public typealias ServiceRegistrationChange = NWListener.ServiceRegistrationChange

    /// A listener on every address, port chosen by the system, advertising `provider`'s
    /// service once it is ready. Throws `NetworkError.invalidConfiguration` for a service that
    /// cannot be advertised (a bad type, a name over 63 bytes, a TXT record over 8,900 bytes)
    /// and `NetworkError.unsupported` for a domain other than `local.`.
    ///
    /// ```swift
    /// let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp"), using: .parameters { TCP() })
    /// ```
    public convenience init(for provider: some ListenerProvider, using parameters: NetworkParameters<ApplicationProtocol>) throws {
        try ServiceAdvertiser.check(provider.service)
        self.init(for: nil, using: parameters)
        serviceState.withLock { $0.service = provider.service }
    }

    /// A listener over the stack the builder returns, advertising `provider`'s service once
    /// it is ready.
    ///
    /// ```swift
    /// let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp")) {
    ///     TLS().identity(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
    /// }
    /// listener.onServiceRegistrationUpdate { _, change in
    ///     if case .add(let endpoint) = change { print("advertised as", endpoint) }
    /// }
    /// ```
    public convenience init(for provider: some ListenerProvider, @ProtocolStackBuilder _ stack: () -> ApplicationProtocol) throws {
        try self.init(for: provider, using: NetworkParameters(stack: stack()))
    }

    /// The service advertised while the listener runs (nil: none). Setting it while the
    /// listener runs advertises it, whether or not one was before: a new name, type or domain
    /// withdraws the service advertised (its goodbye, `remove`) first; a new TXT record alone
    /// is announced under the same name, in place of the old (no `remove`, no `add`). A service
    /// that cannot be advertised fails the listener.
    public var service: NWListener.Service? {
        get { serviceState.withLock { $0.service } }
        set {
            let advertiser = serviceState.withLock { state -> ServiceAdvertiser? in
                state.service = newValue
                return state.advertiser
            }
            guard let advertiser, let port else { return }
            if let newValue {
                do {
                    try advertiser.advertise(newValue, port: port.rawValue)
                } catch {
                    advertiser.withdraw()
                    let endRun = serviceState.withLock { state in
                        state.failure = state.failure ?? NetworkError(error)
                        return state.endRun
                    }
                    endRun?()
                }
            } else {
                advertiser.withdraw()
            }
        }
    }

    /// Calls `handler` with each change of the advertisement: `add` once the service is
    /// registered under a name, `remove` when it stops being (on a rename, a new `service`, or
    /// when `run` ends). Runs on a serial queue of the listener's, one change at a time, in the
    /// order they happened; keep it short.
    ///
    /// ```swift
    /// let listener = try NetworkListener(for: .bonjour(type: "_game._tcp")) { TCP() }
    /// listener.onServiceRegistrationUpdate { _, change in print(change) }
    /// ```
    @discardableResult
    public func onServiceRegistrationUpdate(_ handler: @escaping @Sendable (NetworkListener, ServiceRegistrationChange) -> Void) -> NetworkListener {
        serviceState.withLock { state in
            state.handler = { [weak self] change in
                guard let self else { return }
                handler(self, change)
            }
        }
        return self
    }

    /// Checks the service before the listener binds.
    func checkService() throws {
        if let service = serviceState.withLock({ $0.service }) { try ServiceAdvertiser.check(service) }
    }

    /// Starts advertising the service, if there is one, for `port`; a conflict under
    /// `noAutoRename`, or a service that cannot be advertised, ends `intake` and so `run`.
    func startAdvertising(port: UInt16, intake: InboundIntake<ApplicationProtocol>) {
        // A listener takes requiredInterface alone of the interface parameters (`run` refuses
        // the others): the service is advertised there.
        let filter = BrowseFilter(constraints: InterfaceConstraints(requiredInterface: parameters.requiredInterface))
        let advertiser = ServiceAdvertiser(filter: filter) { [weak self] change in
            self?.serviceState.withLock { $0.handler }?(change)
        } onConflict: { [weak self] service in
            self?.serviceState.withLock { state in
                state.failure = state.failure ?? .dnsFailure(
                    host: "\(service.name ?? DiscoveryRuntime.hostName()).\(service.type).local.",
                    message: "the name is taken on the local network and the service's noAutoRename is set")
            }
            intake.finish()
        }
        let service = serviceState.withLock { state -> NWListener.Service? in
            state.advertiser = advertiser
            state.endRun = { intake.finish() }
            return state.service
        }
        guard let service else { return }
        do {
            try advertiser.advertise(service, port: port)
        } catch {
            serviceState.withLock { $0.failure = $0.failure ?? NetworkError(error) }
            intake.finish()
        }
    }

    /// Stops advertising (the goodbye) as `run` ends.
    func stopAdvertising() {
        serviceState.withLock { state -> ServiceAdvertiser? in
            defer { state.advertiser = nil; state.endRun = nil }
            return state.advertiser
        }?.stop()
    }
}
