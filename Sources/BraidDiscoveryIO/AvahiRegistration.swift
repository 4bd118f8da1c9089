import BraidDiscovery
import CBraidAvahi

/// One advertised service through avahi-daemon: an entry group holding the service (the
/// daemon adds its own host name and addresses), renamed with Avahi's
/// `avahi_alternative_service_name` ("Name #2") when its name is taken, on the network or by
/// another program on the host.
///
/// While the daemon renames the host (its host name collided, or it registers a new one) the
/// group is emptied and the advertisement reported withdrawn; once the daemon runs again the
/// service is added anew, its SRV record pointing at the new host name, and reported
/// registered when the daemon has established it.
final class AvahiRegistration: @unchecked Sendable {
    // @unchecked: `group`, `name`, `service`, `published` and `announced` are touched only with
    // the owner's threaded poll lock held (see `AvahiDiscovery`); the rest is immutable.
    let id: UInt64
    /// The service as asked for, with its TXT record as last updated.
    private(set) var service: MDNSServiceDescription
    /// The interface policy: which interfaces the service is published on (nil: every one).
    let interfaces: (@Sendable (Int32, String) -> Bool)?
    let onEvent: @Sendable (MDNSResponder.Event) -> Void
    unowned let owner: AvahiDiscovery
    private var group: OpaquePointer?
    /// The name the service is advertised under now.
    private(set) var name: String
    /// The interfaces the service was added on, while the group holds it (empty: it does not).
    private var published: [AvahiIfIndex] = []
    /// Whether `registered` was reported since the service was last added.
    private var announced = false

    init(
        id: UInt64, service: MDNSServiceDescription, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onEvent: @escaping @Sendable (MDNSResponder.Event) -> Void, owner: AvahiDiscovery
    ) {
        self.id = id
        self.service = service
        self.interfaces = interfaces
        self.onEvent = onEvent
        self.owner = owner
        name = String(decoding: service.instance, as: UTF8.self)
    }

    /// Makes the entry group and, when the daemon runs (`publishNow`), commits the service;
    /// false if the daemon refuses it.
    func start(_ client: OpaquePointer, publishNow: Bool) -> Bool {
        group = avahi_entry_group_new(
            client,
            { group, state, context in
                guard let context else { return }
                Unmanaged<AvahiRegistration>.fromOpaque(context).takeUnretainedValue().groupChanged(state, group: group)
            }, Unmanaged.passUnretained(self).toOpaque())
        guard let group else { return false }
        return publishNow ? publish(group) : true
    }

    /// Frees the entry group: the daemon withdraws the service (with goodbye packets).
    func stop() {
        if let group { avahi_entry_group_free(group) }
        group = nil
        published = []
    }

    /// The daemon's host name is being registered again: its services must wait for it (their
    /// SRV records name the host). Empties the group and reports the service withdrawn.
    func suspend() {
        guard let group, !published.isEmpty else { return }
        avahi_entry_group_reset(group)
        published = []
        if announced {
            announced = false
            report(.withdrawn(instance: Array(name.utf8)))
        }
    }

    /// The daemon runs again: adds the service anew if it was withdrawn. False if the daemon
    /// refuses it.
    func resume() -> Bool {
        guard let group else { return false }
        guard published.isEmpty else { return true }
        return publish(group)
    }

    /// Replaces the TXT record of the service published (or to be): the daemon announces the
    /// new one in place (avahi_entry_group_update_service_txt_strlst), no probe, no goodbye.
    /// False if the daemon refuses it.
    func updateTXT(_ txt: [[UInt8]]) -> Bool {
        service.txt = txt
        guard let group, !published.isEmpty else { return true }
        let type = typeText
        return withTXT { list in
            published.allSatisfy { index in
                avahi_entry_group_update_service_txt_strlst(
                    group, index, AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(rawValue: 0),
                    name, type, nil, list) >= 0
            }
        }
    }

    private var typeText: String {
        service.serviceType.labels.prefix(2).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }

    /// Calls `body` with the TXT record as an Avahi string list.
    private func withTXT<T>(_ body: (UnsafeMutablePointer<AvahiStringList>?) -> T) -> T {
        var txt: UnsafeMutablePointer<AvahiStringList>?
        // avahi_string_list_add_arbitrary puts each string first: add them last to first.
        for string in service.txt.reversed() {
            txt = string.withUnsafeBufferPointer { avahi_string_list_add_arbitrary(txt, $0.baseAddress, $0.count) }
        }
        defer { avahi_string_list_free(txt) }
        return body(txt)
    }

    /// Adds the service under `name` on each allowed interface (every interface, unrestricted)
    /// and commits; a name another program on this host holds is renamed at once (the daemon
    /// refuses it before any probe). False if the daemon refuses it or no interface is allowed.
    private func publish(_ group: OpaquePointer) -> Bool {
        let indexes = interfaces == nil ? [AvahiIfIndex(AVAHI_IF_UNSPEC)] : AvahiDiscovery.allowedInterfaces(interfaces)
        guard !indexes.isEmpty else { return false }
        let type = typeText
        announced = false
        return withTXT { txt in
            while true {
                var added: Int32 = 0
                for index in indexes where added >= 0 {
                    added = avahi_entry_group_add_service_strlst(
                        group, index, AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(rawValue: 0),
                        name, type, nil, nil, service.port, txt)
                }
                if added == Int32(AVAHI_ERR_COLLISION) {
                    // Interfaces added under the old name go too: the new name is added on all.
                    avahi_entry_group_reset(group)
                    rename()
                    continue
                }
                guard added >= 0, avahi_entry_group_commit(group) >= 0 else { return false }
                published = indexes
                return true
            }
        }
    }

    /// Takes Avahi's alternative name and reports the change, as the embedded responder does.
    private func rename() {
        let old = name
        if let alternative = avahi_alternative_service_name(name) {
            name = String(cString: alternative)
            avahi_free(alternative)
        }
        report(.renamed(from: Array(old.utf8), to: Array(name.utf8)))
    }

    private func report(_ event: MDNSResponder.Event) {
        let onEvent = onEvent
        owner.deliver { onEvent(event) }
    }

    private func groupChanged(_ state: AvahiEntryGroupState, group: OpaquePointer?) {
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            guard !published.isEmpty, !announced else { return }
            announced = true
            report(.registered(instance: Array(name.utf8)))
        case AVAHI_ENTRY_GROUP_COLLISION:
            guard let group else { return }
            rename()
            avahi_entry_group_reset(group)
            published = []
            if !publish(group) { owner.registrationFailed(self) }
        case AVAHI_ENTRY_GROUP_FAILURE:
            owner.registrationFailed(self)
        default:
            break
        }
    }
}
