import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import BraidIO
import Dispatch
import Foundation

/// One listener's DNS-SD advertisement, for `NWListener` and `NetworkListener` alike: checks
/// the service, registers it with multicast DNS once the listener has a port, turns the
/// responder's events into `add` and `remove` changes, and says goodbye when stopped. A service
/// replaced while advertised by one of another name, type or domain is withdrawn (goodbye,
/// `remove`) and the new one registered; one that differs in its TXT record alone keeps its
/// name and has the new record announced in its place (RFC 6762 §8.4: no goodbye, no probe,
/// no `remove`).
/// The service is advertised only on the interfaces the listener's parameters allow, and
/// answers there carry those interfaces' addresses alone.
///
/// The back end is chosen once, at the first registration, from the context the advertiser
/// was made in (the listener's start): a service set later, from any thread, goes to the same
/// one. Changes reach `deliver` in the order the advertisement went through them, one at a
/// time, on a serial queue of the advertiser's: each is queued while the state lock that
/// decided it is held, so a `remove` can never overtake the `add` it undoes.
final class ServiceAdvertiser: Sendable {
    /// How a change reaches the listener's application (its queue, its handler).
    let deliver: @Sendable (NWListener.ServiceRegistrationChange) -> Void
    /// Called once when the name is taken and the service may not be renamed.
    let onConflict: @Sendable (NWListener.Service) -> Void

    private struct State {
        /// The back end, chosen at the first registration and kept.
        var backend: (any DiscoveryBackend)?
        var id: UInt64?
        var service: NWListener.Service?
        var port: UInt16?
        var registered: NWEndpoint?
        var stopped = false
        /// Counts registrations, so that a late event of a withdrawn one is ignored.
        var generation = 0
    }
    private let state = Locked(State())
    /// Orders `advertise`, `withdraw` and `stop` calls made on several threads at once.
    private let operations = NSLock()
    /// Where `deliver` runs, one change at a time, in the order they were decided.
    private let deliveries = DispatchQueue(label: "braid.discovery.registration")
    private static let deliveryKey = DispatchSpecificKey<ObjectIdentifier>()
    /// The loop whose attached discovery serves this advertiser, if any (captured when made).
    private let loop: EventLoop?

    /// The interfaces the service is advertised on (the listener's interface parameters).
    let filter: BrowseFilter

    /// Made where the listener starts: a discovery attached to the loop of that task's network
    /// environment (a test's host in a namespace) serves it, wherever `advertise` is called from.
    /// `backend`, if given, is the back end, chosen already.
    init(
        filter: BrowseFilter, backend: (any DiscoveryBackend)? = nil,
        deliver: @escaping @Sendable (NWListener.ServiceRegistrationChange) -> Void,
        onConflict: @escaping @Sendable (NWListener.Service) -> Void
    ) {
        self.filter = filter
        self.deliver = deliver
        self.onConflict = onConflict
        loop = DiscoveryRuntime.contextLoop()
        state.withLock { $0.backend = backend }
        deliveries.setSpecific(key: Self.deliveryKey, value: ObjectIdentifier(deliveries))
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

    /// The back end: the one chosen at the first registration, else chosen now.
    private func backend() throws -> any DiscoveryBackend {
        if let chosen = state.withLock({ $0.backend }) { return chosen }
        let made = try DiscoveryRuntime.discovery(on: loop)
        return state.withLock { state in
            if let chosen = state.backend { return chosen }
            state.backend = made
            return made
        }
    }

    /// Registers `service` for `port`. A service advertised now that differs from `service` in
    /// its TXT record alone gets the new record announced under its name; any other is
    /// withdrawn first. Throws what makes the service impossible to advertise.
    func advertise(_ service: NWListener.Service, port: UInt16) throws {
        operations.lock()
        defer { operations.unlock() }
        try Self.check(service)
        let type = try DiscoveryRuntime.serviceType(service.type, domain: service.domain)
        let txt = try Self.checkedTXTRecord(of: service)
        let updated = state.withLock { state -> Bool in
            guard !state.stopped, let current = state.service, let id = state.id, let backend = state.backend,
                  state.port == port, current.name == service.name, current.type == service.type,
                  current.domain == service.domain, current.noAutoRename == service.noAutoRename
            else { return false }
            state.service = service
            // Under the lock, so two updates reach the back end in the order they were made
            // (it only queues the work).
            if current.txtRecord != service.txtRecord { backend.updateTXT(id, txt: txt.strings) }
            return true
        }
        if updated { return }
        let discovery = try backend()
        let name = service.name ?? DiscoveryRuntime.hostName()
        let description = MDNSServiceDescription(
            instance: Array(name.utf8), serviceType: type, port: port, txt: txt.strings,
            hostLabel: DiscoveryRuntime.uniqueHostLabel(), addresses: [])
        withdrawLocked()
        let generation = state.withLock { state in
            state.generation += 1
            return state.generation
        }
        let typeText = service.type.trimmingCharacters(in: CharacterSet(charactersIn: "."))
        let noAutoRename = service.noAutoRename
        let id = discovery.advertise(description, interfaces: filter.interfaces) { [weak self] event in
            guard let self, self.state.withLock({ $0.generation == generation && !$0.stopped }) else { return }
            switch event {
            case .renamed where noAutoRename:
                self.stop()
                self.onConflict(service)
            case .registered(let instance):
                let endpoint = NWEndpoint.service(name: String(decoding: instance, as: UTF8.self), type: typeText, domain: "local.", interface: nil)
                self.registrationChanged(to: endpoint, generation: generation)
            case .withdrawn:
                self.registrationChanged(to: nil, generation: generation)
            case .renamed:
                break
            }
        }
        let stopped = state.withLock { state -> Bool in
            guard !state.stopped, state.generation == generation else { return true }
            state.id = id
            state.service = service
            state.port = port
            return false
        }
        if stopped { discovery.stopAdvertising(id) }
    }

    /// The service advertised now (or being registered).
    var service: NWListener.Service? { state.withLock { $0.service } }

    /// Stops advertising for good: goodbye, and `remove` for the name advertised, delivered
    /// before this returns (unless called from a delivery).
    func stop() {
        operations.lock()
        state.withLock { state in
            state.stopped = true
            state.generation += 1
        }
        withdrawLocked()
        operations.unlock()
        if DispatchQueue.getSpecific(key: Self.deliveryKey) != ObjectIdentifier(deliveries) { deliveries.sync {} }
    }

    /// Withdraws the current registration, if any: goodbye, and `remove` for its name.
    func withdraw() {
        operations.lock()
        defer { operations.unlock() }
        withdrawLocked()
    }

    /// `withdraw`, with `operations` held. A new generation makes a `.registered` event of the
    /// old registration, still in flight, a no-op (no `add` after the `remove`).
    private func withdrawLocked() {
        let registration = state.withLock { state -> (any DiscoveryBackend, UInt64)? in
            state.generation += 1
            defer { state.id = nil; state.registered = nil; state.service = nil; state.port = nil }
            if let registered = state.registered { queue(.remove(registered)) }
            guard let discovery = state.backend, let id = state.id else { return nil }
            return (discovery, id)
        }
        if let (discovery, id) = registration { discovery.stopAdvertising(id) }
    }

    /// The registration of `generation` is now under `endpoint` (nil: withdrawn for a while).
    private func registrationChanged(to endpoint: NWEndpoint?, generation: Int) {
        state.withLock { state in
            guard state.generation == generation, !state.stopped, state.registered != endpoint else { return }
            if let previous = state.registered { queue(.remove(previous)) }
            if let endpoint { queue(.add(endpoint)) }
            state.registered = endpoint
        }
    }

    /// Queues a change for `deliver`; called with the state lock held, so the queue's order is
    /// the order of the state's changes.
    private func queue(_ change: NWListener.ServiceRegistrationChange) {
        let deliver = deliver
        deliveries.async { deliver(change) }
    }
}
