import BraidDiscovery
import CBraidAvahi
import Dispatch
import Glibc
import Synchronization

/// Multicast DNS through the system's avahi-daemon (over D-Bus, with libavahi-client): the
/// daemon browses, resolves and answers for the whole host, so Braid's services share its host
/// name, its caches and its conflict handling with every other program on the machine.
///
/// The client runs on an Avahi threaded poll (a thread of its own). Avahi calls back on that
/// thread with the poll's lock held; every other touch of the client, its browsers and entry
/// groups, and the tables below takes that lock first (`locked`). Results and events go to the
/// caller's closures on a serial dispatch queue, so a closure may call back in (to stop, say)
/// without meeting the lock on the poll's thread.
///
/// When the daemon goes away (it stops, or the bus drops the client), every browse and
/// advertisement moves to the embedded engine (`fallback`): each browse first reports an empty
/// list, then what the embedded engine finds; each advertisement is probed and announced again
/// by the embedded responder. Later calls go straight to the embedded engine.
package final class AvahiDiscovery: DiscoveryBackend, @unchecked Sendable {
    // @unchecked: the stored state below is only read or written with the threaded poll's lock
    // held (on the poll's thread, or inside `locked`), which orders every access.
    private let poll: OpaquePointer
    private var client: OpaquePointer?
    private var browsers: [UInt64: AvahiBrowse] = [:]
    private var registrations: [UInt64: AvahiRegistration] = [:]
    /// The embedded engine, once the daemon has gone away, and the IDs there of what moved.
    private var embedded: (any DiscoveryBackend)?
    private var moved: [UInt64: UInt64] = [:]
    private var lostReason: String?
    private let fallback: @Sendable () throws -> any DiscoveryBackend
    private let ids = Atomic<UInt64>(1)
    /// Where callers' closures run, in the order Avahi reported.
    let deliveries = DispatchQueue(label: "braid.discovery.avahi")

    package var name: String { "avahi" }

    /// Connects to the daemon on the D-Bus system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else the
    /// system's socket) and starts the client's thread. Throws `AvahiError` when no daemon
    /// answers. `fallback` makes the embedded engine, should the daemon go away later.
    package init(fallback: @escaping @Sendable () throws -> any DiscoveryBackend) throws(AvahiError) {
        guard let poll = avahi_threaded_poll_new() else { throw AvahiError(code: Int32(AVAHI_ERR_NO_MEMORY), during: "avahi_threaded_poll_new") }
        self.poll = poll
        self.fallback = fallback
        var error: Int32 = 0
        // The poll's thread is not running yet: the callback Avahi makes from inside
        // avahi_client_new runs here, on this thread, and nothing else touches the state.
        let made = avahi_client_new(
            avahi_threaded_poll_get(poll), AvahiClientFlags(rawValue: 0),
            { _, state, context in
                guard let context else { return }
                Unmanaged<AvahiDiscovery>.fromOpaque(context).takeUnretainedValue().clientChanged(state)
            }, Unmanaged.passUnretained(self).toOpaque(), &error)
        // A throw from here on runs deinit, which frees the client and the poll.
        guard let made else { throw AvahiError(code: error, during: "connecting to avahi-daemon over D-Bus") }
        client = made
        guard avahi_threaded_poll_start(poll) >= 0 else {
            throw AvahiError(code: Int32(AVAHI_ERR_FAILURE), during: "avahi_threaded_poll_start")
        }
    }

    deinit {
        avahi_threaded_poll_stop(poll)
        for browse in browsers.values { browse.stop() }
        for registration in registrations.values { registration.stop() }
        if let client { avahi_client_free(client) }
        avahi_threaded_poll_free(poll)
    }

    /// Why the daemon is no longer used (nil while it is).
    package var lost: String? { locked { lostReason } }

    /// The daemon queries on every interface it runs on; with `interfaces`, instances seen on
    /// an interface it does not allow are left out of the results (asked, on the client's
    /// thread, when an instance first appears on an interface).
    package func browse(
        type: DNSName, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void
    ) -> UInt64 {
        let id = ids.add(1, ordering: .relaxed).oldValue
        locked {
            let browse = AvahiBrowse(id: id, type: type, interfaces: interfaces, onChange: onChange, owner: self)
            if embedded == nil, let client, browse.start(client) {
                browsers[id] = browse
            } else {
                browse.stop()
                moveBrowse(browse)
            }
        }
        return id
    }

    package func stopBrowsing(_ id: UInt64) {
        locked {
            if let browse = browsers.removeValue(forKey: id) {
                browse.stop()
            } else if let there = moved.removeValue(forKey: id) {
                embedded?.stopBrowsing(there)
            }
        }
    }

    package func isBrowsing(_ id: UInt64) async -> Bool {
        let (here, there) = locked { (browsers[id] != nil, moved[id].map { ($0, embedded!) }) }
        if here { return true }
        guard let (id, embedded) = there else { return false }
        return await embedded.isBrowsing(id)
    }

    /// With `interfaces`, the service is published on each interface it allows of those the
    /// system has when the advertisement starts (or is renamed); an advertisement none of whose
    /// interfaces exist yet goes to the embedded engine, which asks again as interfaces come.
    package func advertise(
        _ service: MDNSServiceDescription, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void
    ) -> UInt64 {
        let id = ids.add(1, ordering: .relaxed).oldValue
        locked {
            let registration = AvahiRegistration(id: id, service: service, interfaces: interfaces, onEvent: onEvent, owner: self)
            if embedded == nil, let client, registration.start(client, publishNow: avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING) {
                registrations[id] = registration
            } else {
                registration.stop()
                moveRegistration(registration)
            }
        }
        return id
    }

    package func stopAdvertising(_ id: UInt64) {
        locked {
            if let registration = registrations.removeValue(forKey: id) {
                registration.stop()
            } else if let there = moved.removeValue(forKey: id) {
                embedded?.stopAdvertising(there)
            }
        }
    }

    /// The daemon announces the new TXT record in place; if it refuses, the service is
    /// registered again with it.
    package func updateTXT(_ id: UInt64, txt: [[UInt8]]) {
        locked {
            if let registration = registrations[id] {
                if !registration.updateTXT(txt) { republish(registration) }
            } else if let there = moved[id] {
                embedded?.updateTXT(there, txt: txt)
            }
        }
    }

    // MARK: - On the poll's thread (or under the lock)

    private func clientChanged(_ state: AvahiClientState) {
        switch state {
        case AVAHI_CLIENT_S_COLLISION, AVAHI_CLIENT_S_REGISTERING:
            // The daemon's host name collided, or it registers a new one: services wait for it
            // (Avahi's rule: reset the entry groups, add the services again once it runs).
            for registration in registrations.values { registration.suspend() }
        case AVAHI_CLIENT_S_RUNNING:
            for registration in Array(registrations.values) where !registration.resume() { registrationFailed(registration) }
        case AVAHI_CLIENT_FAILURE:
            lose()
        default:
            break
        }
    }

    /// A registration the daemon would not update: stopped and published afresh (its new TXT
    /// record included), on the daemon if it takes it, else on the embedded engine.
    private func republish(_ registration: AvahiRegistration) {
        registration.stop()
        guard let client, registration.start(client, publishNow: avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING) else {
            registrationFailed(registration)
            return
        }
    }

    /// The daemon is gone: everything moves to the embedded engine.
    private func lose() {
        guard let client else { return }
        let code = avahi_client_errno(client)
        lostReason = AvahiError(code: code, during: "talking to avahi-daemon").description
        for browse in browsers.values { browse.stop(); moveBrowse(browse) }
        browsers = [:]
        for registration in registrations.values { registration.stop(); moveRegistration(registration) }
        registrations = [:]
    }

    /// A browse the daemon cannot run (or no longer runs): it continues on the embedded engine.
    func browseFailed(_ browse: AvahiBrowse) {
        guard browsers.removeValue(forKey: browse.id) != nil else { return }
        browse.stop()
        moveBrowse(browse)
    }

    /// An advertisement the daemon cannot publish: it continues on the embedded engine.
    func registrationFailed(_ registration: AvahiRegistration) {
        guard registrations.removeValue(forKey: registration.id) != nil else { return }
        registration.stop()
        moveRegistration(registration)
    }

    private func moveBrowse(_ browse: AvahiBrowse) {
        guard let embedded = embeddedEngine() else { return }
        if browse.reported { deliver { browse.onChange([]) } }
        moved[browse.id] = embedded.browse(type: browse.type, interfaces: browse.interfaces, onChange: browse.onChange)
    }

    private func moveRegistration(_ registration: AvahiRegistration) {
        guard let embedded = embeddedEngine() else { return }
        var service = registration.service
        service.instance = Array(registration.name.utf8)
        moved[registration.id] = embedded.advertise(service, interfaces: registration.interfaces, onEvent: registration.onEvent)
    }

    /// The embedded engine, made on first need. If its sockets cannot open either, what moved
    /// stays silent: the browse finds nothing, the service is not advertised.
    private func embeddedEngine() -> (any DiscoveryBackend)? {
        if embedded == nil { embedded = try? fallback() }
        return embedded
    }

    /// Whether `policy` allows the interface with index `index` (an unnamed index, Avahi's
    /// "any interface", only when there is no policy).
    package static func allows(_ policy: (@Sendable (Int32, String) -> Bool)?, _ index: AvahiIfIndex) -> Bool {
        guard let policy else { return true }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard index > 0, if_indextoname(UInt32(index), &buffer) != nil else { return false }
        return policy(index, String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// The indexes of the system's interfaces `policy` allows, in index order.
    package static func allowedInterfaces(_ policy: (@Sendable (Int32, String) -> Bool)?) -> [AvahiIfIndex] {
        guard let list = if_nameindex() else { return [] }
        defer { if_freenameindex(list) }
        var indexes: [AvahiIfIndex] = []
        var entry = list
        while entry.pointee.if_index != 0 {
            if let name = entry.pointee.if_name, policy?(Int32(entry.pointee.if_index), String(cString: name)) ?? true {
                indexes.append(AvahiIfIndex(entry.pointee.if_index))
            }
            entry += 1
        }
        return indexes.sorted()
    }

    /// Runs `body` on the delivery queue.
    func deliver(_ body: @escaping @Sendable () -> Void) {
        deliveries.async(execute: body)
    }

    /// Runs `body` with the threaded poll's lock held. Never called on the poll's thread, where
    /// Avahi already holds it.
    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return try body()
    }
}

/// A failure of the Avahi client library, with Avahi's own words for it.
package struct AvahiError: Error, CustomStringConvertible, Sendable {
    /// Avahi's error code (AVAHI_ERR_…).
    package let code: Int32
    package let during: String

    package var description: String {
        "\(during): \(String(cString: avahi_strerror(code))) (Avahi error \(code))"
    }
}
