import BraidCore
import BraidPerf
import Foundation
import Glibc
import Synchronization

/// A network namespace a test makes for itself (`ip netns add`), with its own links,
/// addresses and routes, so path tests change interfaces without touching the machine's.
/// Code that must see the namespace (a path monitor's netlink socket, which belongs to the
/// namespace of the thread that makes it) runs on a thread that has entered it (setns(2)).
///
/// Needs root (CAP_SYS_ADMIN) and iproute2. Where the kernel or the sandbox refuses, `make`
/// throws with the reason, so the test fails: it is never skipped.
final class NetworkNamespace: Sendable {
    let name: String
    private static let counter = Atomic<Int>(0)

    private init(name: String) { self.name = name }

    /// Runs `body` with a fresh namespace (loopback up), and removes the namespace afterwards.
    static func with<T: Sendable>(_ body: (NetworkNamespace) async throws -> T) async throws -> T {
        await removeLeftovers()
        let name = "braid-\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)"
        try await ip(["netns", "add", name])
        let namespace = NetworkNamespace(name: name)
        do {
            try await namespace.ip("link", "set", "lo", "up")
            let result = try await body(namespace)
            try? await ip(["netns", "del", name])
            return result
        } catch {
            try? await ip(["netns", "del", name])
            throw error
        }
    }

    /// Deletes the namespaces of test processes that are gone (a test killed by its time
    /// limit cannot clean up after itself), once per process.
    private static let sweep = Locked(false)

    private static func removeLeftovers() async {
        guard sweep.withLock({ done in defer { done = true }; return !done }) else { return }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []
        for name in names where name.hasPrefix("braid-") {
            let parts = name.split(separator: "-")
            guard parts.count == 3, let pid = Int32(parts[1]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? await ip(["netns", "del", name])
        }
    }

    /// `ip -n NAME arguments...`.
    func ip(_ arguments: String...) async throws {
        try await ip(arguments)
    }

    /// `ip -n NAME arguments...`, the arguments in an array.
    func ip(_ arguments: [String]) async throws {
        try await Self.ip(["-n", name] + arguments)
    }

    /// Where iproute2's `ip` is.
    static var ipExecutable: String {
        get throws {
            guard let executable = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first(where: FileManager.default.isExecutableFile)
            else { throw NamespaceFailure("iproute2's ip is not installed: the network-namespace tests need it") }
            return executable
        }
    }

    /// A veth pair with one end, `name`, in this namespace and the other, `peer`, in
    /// `peerNamespace` (this one if nil): both up, with `address` and `peerAddress` (/24),
    /// without IPv6 link-local addresses (whose duplicate address detection would send events
    /// while a test wants quiet).
    func addVethPair(_ name: String, address: String, peer: String, peerAddress: String, peerNamespace: NetworkNamespace? = nil) async throws {
        let other = peerNamespace ?? self
        try await ip("link", "add", name, "type", "veth", "peer", "name", peer, "netns", other.name)
        for (namespace, link, value) in [(self, name, address), (other, peer, peerAddress)] {
            try await namespace.ip("link", "set", link, "addrgenmode", "none")
            try await namespace.ip("address", "add", "\(value)/24", "dev", link)
            try await namespace.ip("link", "set", link, "up")
        }
    }

    /// Runs `body` on a new thread that has entered the namespace: sockets it makes belong to
    /// the namespace.
    func inside<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let path = "/run/netns/\(name)"
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    with: Result {
                        try Self.enter(path)
                        return try body()
                    })
            }
            thread.name = "braid-netns"
            thread.start()
        }
    }

    /// Sets a link's IFF_UP in the namespace with an ioctl, and returns the moment it took
    /// effect: the start of the latency a test reports.
    func setLink(_ link: String, up: Bool) async throws -> ContinuousClock.Instant {
        try await inside {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw NamespaceFailure("socket: \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            // struct ifreq: the name (16 bytes), then ifr_flags (a short) in a 24-byte union.
            var request = [UInt8](repeating: 0, count: 40)
            request.replaceSubrange(0..<link.utf8.count, with: Array(link.utf8))
            let getFlags: UInt = 0x8913, setFlags: UInt = 0x8914
            guard request.withUnsafeMutableBytes({ ioctl(fd, getFlags, $0.baseAddress!) }) == 0 else {
                throw NamespaceFailure("SIOCGIFFLAGS \(link): \(String(cString: strerror(errno)))")
            }
            var flags = request.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16, as: UInt16.self) }
            flags = up ? flags | 1 : flags & ~1
            request.withUnsafeMutableBytes { $0.storeBytes(of: flags, toByteOffset: 16, as: UInt16.self) }
            let changed = ContinuousClock.now
            guard request.withUnsafeMutableBytes({ ioctl(fd, setFlags, $0.baseAddress!) }) == 0 else {
                throw NamespaceFailure("SIOCSIFFLAGS \(link): \(String(cString: strerror(errno)))")
            }
            return changed
        }
    }

    /// Moves the calling thread into the namespace (an event loop's thread, say, so the
    /// sockets it makes belong to the namespace).
    func enterOnCurrentThread() throws {
        try Self.enter("/run/netns/\(name)")
    }

    private static func enter(_ path: String) throws {
        // setns(2) is not in Swift's Glibc module; it is in every glibc since 2.14.
        typealias SetNamespace = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(nil, "setns") else { throw NamespaceFailure("this C library has no setns") }
        let setNamespace = unsafeBitCast(symbol, to: SetNamespace.self)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw NamespaceFailure("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let newNetworkNamespace: Int32 = 0x4000_0000
        guard setNamespace(fd, newNetworkNamespace) == 0 else {
            throw NamespaceFailure("setns(\(path), CLONE_NEWNET): \(String(cString: strerror(errno))) (network namespaces need root)")
        }
    }

    private static func ip(_ arguments: [String]) async throws {
        let child = try ChildProcess(try ipExecutable, arguments)
        let exit = try await child.finish(within: 20)
        guard exit.status == 0 else {
            throw NamespaceFailure("`ip \(arguments.joined(separator: " "))` failed (\(exit.status)): \(child.errors) (network namespaces need root and a kernel that allows them)")
        }
    }
}

struct NamespaceFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
