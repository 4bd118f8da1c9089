import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import Foundation

/// One listener's DNS-SD advertisement, for `NWListener` and `NetworkListener` alike: checks
/// the service, registers it with multicast DNS once the listener has a port, turns the
/// responder's events into `add` and `remove` changes, and says goodbye when stopped. A service
/// replaced while advertised is withdrawn (goodbye, `remove`) and the new one registered.
/// The service is advertised only on the interfaces the listener's parameters allow, and
/// answers there carry those interfaces' addresses alone.
final class ServiceAdvertiser: Sendable {
    /// How a change reaches the listener's application (its queue, its handler).
    let deliver: @Sendable (NWListener.ServiceRegistrationChange) -> Void
    /// Called once when the name is taken and the service may not be renamed.
    let onConflict: @Sendable (NWListener.Service) -> Void

    private struct State {
        var discovery: (any DiscoveryBackend)?
        var id: UInt64?
        var service: NWListener.Service?
        var registered: NWEndpoint?
        var stopped = false
        /// Counts registrations, so that a late event of a withdrawn one is ignored.
        var generation = 0
    }
    private let state = Locked(State())

    /// The interfaces the service is advertised on (the listener's interface parameters).
    let filter: BrowseFilter

    init(
        filter: BrowseFilter, deliver: @escaping @Sendable (NWListener.ServiceRegistrationChange) -> Void,
        onConflict: @escaping @Sendable (NWListener.Service) -> Void
    ) {
        self.filter = filter
        self.deliver = deliver
        self.onConflict = onConflict
    }

    /// The largest TXT record advertised (its wire form): what fits one multicast DNS packet
    /// (RFC 6762 §17) beside the other records of the service.
    static let maximumTXTRecordSize = 8900

    /// The service's TXT record, if it fits a multicast DNS packet.
    static func checkedTXTRecord(of service: NWListener.Service) throws(NetworkError) -> NWTXTRecord {
        let txt = service.txtRecord.flatMap { NWTXTRecord($0) } ?? NWTXTRecord()
        let size = txt.strings.reduce(0) { $0 + 1 + $1.count }
        guard size <= maximumTXTRecordSize else {
            throw .invalidConfiguration("a TXT record may have at most \(maximumTXTRecordSize) bytes to fit one multicast DNS packet, not \(size)")
        }
        return txt
    }

    /// Checks what can be checked before the listener binds: the type, the domain, the name's
    /// length and the TXT record's size.
    static func check(_ service: NWListener.Service) throws {
        _ = try DiscoveryRuntime.serviceType(service.type, domain: service.domain)
        let name = service.name ?? DiscoveryRuntime.hostName()
        guard !name.isEmpty, name.utf8.count <= DNSName.maximumLabelLength else {
            throw NetworkError.invalidConfiguration("a service name must have 1 to \(DNSName.maximumLabelLength) bytes of UTF-8, not \(name.utf8.count)")
        }
        _ = try checkedTXTRecord(of: service)
    }

    /// Registers `service` for `port`, withdrawing whatever was advertised before. Throws what
    /// makes the service impossible to advertise.
    func advertise(_ service: NWListener.Service, port: UInt16) throws {
        try Self.check(service)
        let type = try DiscoveryRuntime.serviceType(service.type, domain: service.domain)
        let discovery = try DiscoveryRuntime.discovery()
        let name = service.name ?? DiscoveryRuntime.hostName()
        let txt = try Self.checkedTXTRecord(of: service)
        let description = MDNSServiceDescription(
            instance: Array(name.utf8), serviceType: type, port: port, txt: txt.strings,
            hostLabel: DiscoveryRuntime.uniqueHostLabel(), addresses: [])
        withdraw()
        let generation = state.withLock { state in
            state.generation += 1
            return state.generation
        }
        let typeText = service.type.trimmingCharacters(in: CharacterSet(charactersIn: "."))
        let noAutoRename = service.noAutoRename
        let id = discovery.advertise(description, interfaces: filter.interfaces) { [weak self] event in
            guard let self, self.state.withLock({ $0.generation == generation && !$0.stopped }) else { return }
            if case .renamed = event, noAutoRename {
                self.stop()
                self.onConflict(service)
                return
            }
            guard case .registered(let instance) = event else { return }
            let endpoint = NWEndpoint.service(name: String(decoding: instance, as: UTF8.self), type: typeText, domain: "local.", interface: nil)
            self.registrationChanged(to: endpoint, generation: generation)
        }
        let stopped = state.withLock { state -> Bool in
            guard !state.stopped, state.generation == generation else { return true }
            state.discovery = discovery
            state.id = id
            state.service = service
            return false
        }
        if stopped { discovery.stopAdvertising(id) }
    }

    /// The service advertised now (or being registered).
    var service: NWListener.Service? { state.withLock { $0.service } }

    /// Stops advertising for good: goodbye, and `remove` for the name advertised.
    func stop() {
        state.withLock { state in
            state.stopped = true
            state.generation += 1
        }
        withdraw()
    }

    /// Withdraws the current registration, if any: goodbye, and `remove` for its name. A new
    /// generation makes a `.registered` event of the old registration, still in flight, a no-op
    /// (no `add` after the `remove`).
    func withdraw() {
        let (registration, registered) = state.withLock { state -> ((any DiscoveryBackend, UInt64)?, NWEndpoint?) in
            state.generation += 1
            defer { state.discovery = nil; state.id = nil; state.registered = nil; state.service = nil }
            guard let discovery = state.discovery, let id = state.id else { return (nil, state.registered) }
            return ((discovery, id), state.registered)
        }
        if let (discovery, id) = registration { discovery.stopAdvertising(id) }
        if let registered { deliver(.remove(registered)) }
    }

    private func registrationChanged(to endpoint: NWEndpoint, generation: Int) {
        let previous = state.withLock { state -> NWEndpoint?? in
            guard state.generation == generation, !state.stopped else { return .none }
            defer { state.registered = endpoint }
            return .some(state.registered)
        }
        guard case .some(let previous) = previous, previous != endpoint else { return }
        if let previous { deliver(.remove(previous)) }
        deliver(.add(endpoint))
    }
}
