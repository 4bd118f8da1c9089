import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import Foundation

extension NWListener {
    /// A DNS-SD service a listener advertises once it is ready: a name (nil: the host's name),
    /// a type ("_game._tcp"), a domain (nil: "local.") and a TXT record.
    ///
    /// ```swift
    /// let listener = try NWListener(using: .tcp)
    /// listener.service = NWListener.Service(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))
    /// listener.serviceRegistrationUpdateHandler = { change in
    ///     if case .add(let endpoint) = change { print("advertised as", endpoint) }
    /// }
    /// ```
    public struct Service: Sendable, Hashable {
        public let name: String?
        public let type: String
        public let domain: String?
        /// The TXT record's wire form (length-prefixed strings).
        public let txtRecord: Data?
        /// Whether a name taken on the network fails the listener (with `NWError.dns(-65548)`,
        /// DNS-SD's name-conflict error) instead of advertising under "Name (2)".
        public var noAutoRename = false

        public init(name: String? = nil, type: String, domain: String? = nil, txtRecord: Data? = nil) {
            self.name = name
            self.type = type
            self.domain = domain
            self.txtRecord = txtRecord
        }

        public init(name: String? = nil, type: String, domain: String? = nil, txtRecord: NWTXTRecord) {
            self.init(name: name, type: type, domain: domain, txtRecord: txtRecord.data)
        }
    }

    /// A change in the listener's advertisement.
    public enum ServiceRegistrationChange: Sendable, Hashable {
        /// The service is advertised as this `.service` endpoint (its name may differ from the
        /// one asked for: a name taken on the network is renamed "Name (2)").
        case add(NWEndpoint)
        /// The service is no longer advertised under this endpoint.
        case remove(NWEndpoint)
    }

    /// A listener on a port the system picks, advertising `service` once it is ready. Throws
    /// `NetworkError.invalidConfiguration` for a TXT record too large to advertise.
    public convenience init(service: Service, using parameters: NWParameters) throws {
        _ = try ServiceAdvertiser.checkedTXTRecord(of: service)
        try self.init(using: parameters)
        self.service = service
    }

    /// The service to advertise once the listener is ready. Setting it on a ready listener
    /// advertises it, whether or not the listener advertised before: a service of another name,
    /// type or domain than the one advertised withdraws that one (goodbye, `remove`) first; one
    /// that differs in its TXT record alone keeps the name and announces the new record in its
    /// place (no `remove`, no `add`). Nil withdraws the service.
    public var service: Service? {
        get { shared.withLock { $0.service } }
        set {
            let advertiser = shared.withLock { shared -> ServiceAdvertiser? in
                shared.service = newValue
                return shared.advertiser
            }
            guard let advertiser, let port else { return }
            guard let newValue else {
                advertiser.withdraw()
                return
            }
            do {
                try advertiser.advertise(newValue, port: port.rawValue)
            } catch {
                update(.failed(NWError(NetworkError(error))))
                cancel()
            }
        }
    }

    /// Called on the listener's queue when the service is advertised under a name, and when it
    /// stops being advertised under it.
    public var serviceRegistrationUpdateHandler: (@Sendable (_ change: ServiceRegistrationChange) -> Void)? {
        get { shared.withLock { $0.serviceRegistrationUpdate } }
        set { shared.withLock { $0.serviceRegistrationUpdate = newValue } }
    }

    /// Called once the listener is ready, in the task that runs it: makes the advertiser (with
    /// or without a service; one set later goes to it, and to the discovery back end of this
    /// task's context) and advertises the service set so far.
    func startAdvertising() {
        let advertiser = ServiceAdvertiser(filter: BrowseFilter(parameters: parameters)) { [weak self] change in
            self?.deliver(change)
        } onConflict: { [weak self] _ in
            // DNS-SD's kDNSServiceErr_NameConflict, as Network.framework reports it.
            self?.update(.failed(.dns(-65548)))
            self?.cancel()
        }
        // The advertiser is stored and the service read at once: a `service` set meanwhile is
        // either seen here or finds the advertiser and advertises itself.
        let start = shared.withLock { shared -> (service: Service?, port: UInt16)? in
            guard shared.advertiser == nil, !shared.cancelled, let port = shared.port else { return nil }
            shared.advertiser = advertiser
            return (shared.service, port.rawValue)
        }
        guard let start, let service = start.service else { return }
        let port = start.port
        do {
            try advertiser.advertise(service, port: port)
        } catch {
            // A service that cannot be advertised fails the listener, as Network.framework does.
            update(.failed(NWError(NetworkError(error))))
            cancel()
        }
    }

    func stopAdvertising() {
        shared.withLock { $0.advertiser }?.stop()
    }

    private func deliver(_ change: ServiceRegistrationChange) {
        let (queue, handler) = shared.withLock { ($0.queue, $0.serviceRegistrationUpdate) }
        guard let handler else { return }
        (queue ?? .global()).async { handler(change) }
    }
}
