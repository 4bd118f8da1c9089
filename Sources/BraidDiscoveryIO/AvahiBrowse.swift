import BraidDiscovery
import CBraidAvahi

/// One browse through avahi-daemon: an Avahi service browser for the type, and a service
/// resolver for each instance it reports on each interface and protocol, merged into the
/// embedded engine's results (one per instance and interface, with the addresses the IPv4 and
/// IPv6 resolvers found).
final class AvahiBrowse: @unchecked Sendable {
    // @unchecked: `browser`, `items` and `reported` are touched only with the owner's threaded
    // poll lock held (see `AvahiDiscovery`); the rest is immutable.
    let id: UInt64
    let type: DNSName
    /// The interface policy: which interfaces' instances are reported (nil: every interface's).
    let interfaces: (@Sendable (Int32, String) -> Bool)?
    let onChange: @Sendable ([MDNSBrowseResult]) -> Void
    unowned let owner: AvahiDiscovery
    private var browser: OpaquePointer?
    private var items: [Key: Item] = [:]
    /// Whether a list has gone to `onChange` (so a move to the embedded engine clears it first).
    private(set) var reported = false

    struct Key: Hashable {
        var interface: Int32
        var proto: Int32
        var name: String
    }

    struct Item {
        var resolver: OpaquePointer?
        var host: DNSName?
        var port: UInt16?
        var address: DNSRecordData?
        var txt: [[UInt8]] = []
    }

    init(
        id: UInt64, type: DNSName, interfaces: (@Sendable (Int32, String) -> Bool)?,
        onChange: @escaping @Sendable ([MDNSBrowseResult]) -> Void, owner: AvahiDiscovery
    ) {
        self.id = id
        self.type = type
        self.interfaces = interfaces
        self.onChange = onChange
        self.owner = owner
    }

    /// `_name._tcp`: the type without its domain, as Avahi takes it.
    private var typeText: String {
        type.labels.prefix(2).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }

    /// Starts the service browser; false if the daemon refuses it.
    func start(_ client: OpaquePointer) -> Bool {
        browser = avahi_service_browser_new(
            client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), typeText, "local",
            AvahiLookupFlags(rawValue: 0),
            { _, interface, proto, event, name, _, _, _, context in
                guard let context else { return }
                Unmanaged<AvahiBrowse>.fromOpaque(context).takeUnretainedValue()
                    .browserEvent(event, interface: interface, proto: proto, name: name)
            }, Unmanaged.passUnretained(self).toOpaque())
        return browser != nil
    }

    /// Frees the browser and its resolvers: Avahi calls back for none of them after this.
    func stop() {
        for item in items.values { if let resolver = item.resolver { avahi_service_resolver_free(resolver) } }
        items = [:]
        if let browser { avahi_service_browser_free(browser) }
        browser = nil
    }

    private func browserEvent(_ event: AvahiBrowserEvent, interface: AvahiIfIndex, proto: AvahiProtocol, name: UnsafePointer<CChar>?) {
        switch event {
        case AVAHI_BROWSER_NEW:
            guard let name, let client = browser.flatMap(avahi_service_browser_get_client) else { return }
            let key = Key(interface: interface, proto: proto, name: String(cString: name))
            guard items[key] == nil, AvahiDiscovery.allows(interfaces, interface) else { return }
            // The resolver asks for the address of the protocol the instance was seen on: the
            // IPv4 and IPv6 sightings of one instance together give its A and AAAA addresses.
            let resolver = avahi_service_resolver_new(
                client, interface, proto, name, typeText, "local", proto, AvahiLookupFlags(rawValue: 0),
                { _, interface, proto, event, name, _, _, host, address, port, txt, _, context in
                    guard let context, let name else { return }
                    Unmanaged<AvahiBrowse>.fromOpaque(context).takeUnretainedValue().resolved(
                        Key(interface: interface, proto: proto, name: String(cString: name)),
                        found: event == AVAHI_RESOLVER_FOUND, host: host, address: address, port: port, txt: txt)
                }, Unmanaged.passUnretained(self).toOpaque())
            items[key] = Item(resolver: resolver)
            report()
        case AVAHI_BROWSER_REMOVE:
            guard let name else { return }
            let key = Key(interface: interface, proto: proto, name: String(cString: name))
            if let resolver = items.removeValue(forKey: key)?.resolver { avahi_service_resolver_free(resolver) }
            report()
        case AVAHI_BROWSER_FAILURE:
            owner.browseFailed(self)
        default:
            break
        }
    }

    private func resolved(
        _ key: Key, found: Bool, host: UnsafePointer<CChar>?, address: UnsafePointer<AvahiAddress>?, port: UInt16,
        txt: UnsafeMutablePointer<AvahiStringList>?
    ) {
        // A resolver that times out leaves the instance listed without its SRV data, as the
        // embedded engine lists an instance it has heard only a PTR record for.
        guard found, var item = items[key] else { return }
        item.host = host.flatMap { try? DNSName(String(cString: $0)) }
        item.port = port
        item.address = address.flatMap(Self.recordData)
        item.txt = Self.strings(txt)
        items[key] = item
        report()
    }

    /// The merged list, to the caller on the delivery queue.
    private func report() {
        var merged: [String: MDNSBrowseResult] = [:]
        var order: [String] = []
        for (key, item) in items.sorted(by: { ($0.key.name, $0.key.interface, $0.key.proto) < ($1.key.name, $1.key.interface, $1.key.proto) }) {
            let slot = "\(key.interface)/\(key.name)"
            guard let instanceName = try? DNSName(prefix: Array(key.name.utf8), type) else { continue }
            if merged[slot] == nil {
                order.append(slot)
                merged[slot] = MDNSBrowseResult(instanceName: instanceName, interface: key.interface, txt: [], host: nil, port: nil, addresses: [])
            }
            if item.port != nil {
                merged[slot]!.host = item.host
                merged[slot]!.port = item.port
                merged[slot]!.txt = item.txt
            }
            if let address = item.address, !merged[slot]!.addresses.contains(address) { merged[slot]!.addresses.append(address) }
        }
        let results = order.map { merged[$0]! }
        reported = true
        let onChange = onChange
        owner.deliver { onChange(results) }
    }

    /// An Avahi address as the embedded engine's A or AAAA record data.
    static func recordData(_ address: UnsafePointer<AvahiAddress>) -> DNSRecordData? {
        var data = address.pointee.data
        switch Int(address.pointee.proto) {
        case Int(AVAHI_PROTO_INET): return .a(withUnsafeBytes(of: &data.ipv4.address) { Array($0) })
        case Int(AVAHI_PROTO_INET6): return .aaaa(withUnsafeBytes(of: &data.ipv6.address) { Array($0) })
        default: return nil
        }
    }

    /// An Avahi string list's strings, in order.
    static func strings(_ list: UnsafeMutablePointer<AvahiStringList>?) -> [[UInt8]] {
        var strings: [[UInt8]] = []
        var node = list
        while let current = node {
            let size = avahi_string_list_get_size(current)
            if let text = avahi_string_list_get_text(current) {
                strings.append(Array(UnsafeBufferPointer(start: text, count: size)))
            } else {
                strings.append([])
            }
            node = avahi_string_list_get_next(current)
        }
        return strings
    }
}
