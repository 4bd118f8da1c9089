import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import BraidIO
import Foundation

/// Where browsers, advertised listeners and `.service` connections get multicast DNS from (the
/// system's avahi-daemon, or the responder and querier inside the process, `MDNSDiscovery`, on
/// one of Braid's loops), and the checks that turn Apple's type and domain strings into DNS names.
enum DiscoveryRuntime {
    /// The back end new browsers, advertisements and resolutions use: a discovery attached to
    /// the loop the work runs on (a test's host in a network namespace) first, else the one
    /// `DiscoveryBackendChoice` picks from `BRAID_DISCOVERY_BACKEND`.
    static func discovery() throws -> any DiscoveryBackend {
        try discovery(on: contextLoop())
    }

    /// The back end for work whose loop is `loop` (as `contextLoop()` gave it, where the work
    /// began): the discovery attached to it, else the one `BRAID_DISCOVERY_BACKEND` picks.
    static func discovery(on loop: EventLoop?) throws -> any DiscoveryBackend {
        if let loop, let attached = MDNSDiscovery.attached(to: loop) { return attached }
        return try DiscoveryBackendChoice.fromEnvironment().backend()
    }

    /// The loop the calling task's work runs on, if it names one: its network environment's,
    /// or that of the connection whose `.service` endpoint is being resolved.
    static func contextLoop() -> EventLoop? {
        NetworkEnvironment.current?.loop ?? establishmentLoop
    }

    /// The discovery attached to the loop the work runs on, if any.
    static func attached() -> MDNSDiscovery? {
        guard let loop = contextLoop() else { return nil }
        return MDNSDiscovery.attached(to: loop)
    }

    /// Braid's own multicast DNS: the one attached to the loop the work runs on, else the
    /// process's, opening its sockets on first use.
    static func embedded() throws -> MDNSDiscovery {
        if let attached = attached() { return attached }
        do {
            return try MDNSDiscovery.shared(on: LoopPool.loop())
        } catch {
            throw NetworkError.system(call: "multicast DNS socket (\(error))", errno: 0)
        }
    }

    /// The loop of the connection whose `.service` endpoint is being resolved.
    @TaskLocal static var establishmentLoop: EventLoop?

    /// `_type._tcp` (or `._udp`) in `domain` as a DNS name; only multicast DNS's `local.` domain
    /// is served (wide-area DNS-SD is not).
    static func serviceType(_ type: String, domain: String?) throws -> DNSName {
        let domain = (domain ?? "local.").trimmingCharacters(in: CharacterSet(charactersIn: "."))
        guard domain.lowercased() == "local" || domain.isEmpty else {
            throw NetworkError.unsupported("DNS-SD in the domain \"\(domain)\" (Braid browses and advertises in local. over multicast DNS only)")
        }
        let trimmed = type.trimmingCharacters(in: CharacterSet(charactersIn: "."))
        let labels = trimmed.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard labels.count == 2, labels[0].hasPrefix("_"), labels[0].count >= 2, labels[0].utf8.count <= 16,
              ["_tcp", "_udp"].contains(labels[1].lowercased())
        else {
            throw NetworkError.invalidConfiguration("\"\(type)\" is not a DNS-SD service type: it must look like \"_name._tcp\" or \"_name._udp\", the name at most 15 characters")
        }
        do {
            return try DNSName("\(trimmed).local")
        } catch {
            throw NetworkError.invalidConfiguration("\"\(type)\" is not a DNS-SD service type: \(error)")
        }
    }

    /// The machine's host name (the default name of an advertised service).
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "Braid" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The host label an advertised service's SRV record points at: the host's name with a
    /// random suffix, so it never claims the name a system responder (Avahi) holds for the
    /// host, and two advertisers in one process never contend for one host name.
    static func uniqueHostLabel() -> [UInt8] {
        let base = hostName().split(separator: ".").first.map(String.init) ?? "braid"
        return hostLabel(base: base, suffix: String(UInt32.random(in: 0...UInt32.max), radix: 16))
    }

    /// The most bytes of the host's name a host label keeps: with "-braid-" and eight hex digits
    /// the label stays within DNS's 63 bytes.
    static let hostLabelBaseBytes = 48

    /// `base` cut to `hostLabelBaseBytes` UTF-8 bytes at a character boundary, then "-braid-"
    /// and `suffix`.
    static func hostLabel(base: String, suffix: String) -> [UInt8] {
        var head = Substring(base)
        while head.utf8.count > hostLabelBaseBytes { head.removeLast() }
        return Array("\(head)-braid-\(suffix)".utf8)
    }

    /// The endpoint a browse result names.
    static func endpoint(of result: MDNSBrowseResult) -> NWEndpoint {
        let labels = result.instanceName.labels
        let type = labels.dropFirst().prefix(2).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
        let domain = labels.dropFirst(3).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".") + "."
        return .service(name: String(decoding: result.instance, as: UTF8.self), type: type, domain: domain, interface: interface(result.interface))
    }

    /// The interface with index `index`, named as the system names it.
    static func interface(_ index: Int32) -> NWInterface? {
        guard index > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 64)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return NWInterface(type: .other, name: name, index: Int(index))
    }

    /// An interface's type from what /sys/class/net tells of it (the rules of `NWPathMonitor`,
    /// without rtnetlink's part): a wireless device is Wi-Fi, a `wwan` device or name cellular,
    /// an Ethernet device with a bus device behind it wired Ethernet, anything else other.
    static func interfaceType(named name: String) -> NWInterface.InterfaceType {
        let base = "/sys/class/net/\(name)"
        let files = FileManager.default
        if files.fileExists(atPath: base + "/wireless") || files.fileExists(atPath: base + "/phy80211") { return .wifi }
        let uevent = (try? String(contentsOfFile: base + "/uevent", encoding: .utf8)) ?? ""
        if uevent.contains("DEVTYPE=wlan") { return .wifi }
        if uevent.contains("DEVTYPE=wwan") || name.hasPrefix("wwan") { return .cellular }
        let hardware = (try? String(contentsOfFile: base + "/type", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        if hardware == "772" { return .loopback }
        if hardware == "1", files.fileExists(atPath: base + "/device") { return .wiredEthernet }
        return .other
    }

    /// A result's socket addresses at its port (link-local IPv6 scoped to its interface).
    static func addresses(of result: MDNSBrowseResult) -> [SocketAddress] {
        guard let port = result.port else { return [] }
        return result.addresses.compactMap { data -> SocketAddress? in
            switch data {
            case .a(let bytes):
                return SocketAddress(ip: bytes.map(String.init).joined(separator: "."), port: port)
            case .aaaa(let bytes):
                guard bytes.count == 16, var address = SocketAddress(ip: "::", port: port) else { return nil }
                withUnsafeMutableBytes(of: &address.storage.sin6_addr) { $0.copyBytes(from: bytes) }
                if bytes[0] == 0xFE, bytes[1] & 0xC0 == 0x80 { address.storage.sin6_scope_id = UInt32(result.interface) }
                return address
            default:
                return nil
            }
        }
    }
}
