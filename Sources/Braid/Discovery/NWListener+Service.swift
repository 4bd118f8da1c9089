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

    /// The largest TXT record advertised (its wire form): what fits one multicast DNS packet
    /// (RFC 6762 §17) beside the other records of the service.
    static let maximumTXTRecordSize = 8900

    struct Advertisement: Sendable {
        let discovery: any DiscoveryBackend
        let id: UInt64
        var registered: NWEndpoint?
    }

    /// The service's TXT record, if it fits a multicast DNS packet.
    static func checkedTXTRecord(of service: Service) throws(NetworkError) -> NWTXTRecord {
        let txt = service.txtRecord.flatMap { NWTXTRecord($0) } ?? NWTXTRecord()
        let size = txt.strings.reduce(0) { $0 + 1 + $1.count }
        guard size <= maximumTXTRecordSize else {
            throw .invalidConfiguration("a TXT record may have at most \(maximumTXTRecordSize) bytes to fit one multicast DNS packet, not \(size)")
        }
        return txt
    }

    /// A listener on a port the system picks, advertising `service` once it is ready. Throws
    /// `NetworkError.invalidConfiguration` for a TXT record too large to advertise.
    public convenience init(service: Service, using parameters: NWParameters) throws {
        _ = try Self.checkedTXTRecord(of: service)
        try self.init(using: parameters)
        self.service = service
    }

    /// The service to advertise once the listener is ready. Set it before `start(queue:)`.
    public var service: Service? {
        get { shared.withLock { $0.service } }
        set { shared.withLock { $0.service = newValue } }
    }

    /// Called on the listener's queue when the service is advertised under a name, and when it
    /// stops being advertised under it.
    public var serviceRegistrationUpdateHandler: (@Sendable (_ change: ServiceRegistrationChange) -> Void)? {
        get { shared.withLock { $0.serviceRegistrationUpdate } }
        set { shared.withLock { $0.serviceRegistrationUpdate = newValue } }
    }

    func startAdvertising() {
        guard let (service, port) = shared.withLock({ shared -> (Service, UInt16)? in
            guard shared.advertisement == nil, !shared.cancelled, let service = shared.service, let port = shared.port else { return nil }
            return (service, port.rawValue)
        }) else { return }
        do {
            let type = try DiscoveryRuntime.serviceType(service.type, domain: service.domain)
            let discovery = try DiscoveryRuntime.discovery()
            let name = service.name ?? DiscoveryRuntime.hostName()
            guard !name.isEmpty, name.utf8.count <= DNSName.maximumLabelLength else {
                throw NetworkError.invalidConfiguration("a service name must have 1 to \(DNSName.maximumLabelLength) bytes of UTF-8, not \(name.utf8.count)")
            }
            let txt = try Self.checkedTXTRecord(of: service)
            let description = MDNSServiceDescription(
                instance: Array(name.utf8), serviceType: type, port: port, txt: txt.strings,
                hostLabel: DiscoveryRuntime.uniqueHostLabel(), addresses: [])
            let typeText = service.type.trimmingCharacters(in: CharacterSet(charactersIn: "."))
            let noAutoRename = service.noAutoRename
            let id = discovery.advertise(description) { [weak self] event in
                if case .renamed = event, noAutoRename {
                    // DNS-SD's kDNSServiceErr_NameConflict, as Network.framework reports it.
                    self?.stopAdvertising()
                    self?.update(.failed(.dns(-65548)))
                    self?.cancel()
                    return
                }
                guard case .registered(let instance) = event else { return }
                let endpoint = NWEndpoint.service(name: String(decoding: instance, as: UTF8.self), type: typeText, domain: "local.", interface: nil)
                self?.registrationChanged(to: endpoint)
            }
            let cancelled = shared.withLock { shared -> Bool in
                shared.advertisement = Advertisement(discovery: discovery, id: id, registered: nil)
                return shared.cancelled
            }
            if cancelled { stopAdvertising() }
        } catch {
            // A service that cannot be advertised fails the listener, as Network.framework does.
            update(.failed(NWError(NetworkError(error))))
            cancel()
        }
    }

    func stopAdvertising() {
        guard let advertisement = shared.withLock({ shared -> Advertisement? in
            defer { shared.advertisement = nil }
            return shared.advertisement
        }) else { return }
        advertisement.discovery.stopAdvertising(advertisement.id)
        if let endpoint = advertisement.registered { deliver(.remove(endpoint)) }
    }

    private func registrationChanged(to endpoint: NWEndpoint) {
        let old = shared.withLock { shared -> NWEndpoint?? in
            guard shared.advertisement != nil else { return .none }
            defer { shared.advertisement?.registered = endpoint }
            return .some(shared.advertisement?.registered)
        }
        guard case .some(let previous) = old else { return }
        if let previous, previous != endpoint { deliver(.remove(previous)) }
        if previous != endpoint { deliver(.add(endpoint)) }
    }

    private func deliver(_ change: ServiceRegistrationChange) {
        let (queue, handler) = shared.withLock { ($0.queue, $0.serviceRegistrationUpdate) }
        guard let handler else { return }
        (queue ?? .global()).async { handler(change) }
    }
}
