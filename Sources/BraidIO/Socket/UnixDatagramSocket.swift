import BraidCore
// For <sys/socket.h>: SOCK_* and MSG_* (Glibc's module does not give every file its socket types).
import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// A Unix-domain datagram socket behind the same `DatagramSocket` vocabulary as `UDPSocket`,
/// so UDP's channel and server group run over it unchanged: a client's, connected to a
/// server's socket file, or a server's, bound to its own. It has no IP addresses: it reports
/// itself as `local` and a client's peer as `remote`, and a server names each sender by an
/// address of its own (all from the IPv6 discard prefix, 100::/64, which no packet ever
/// carries), which its sends translate back; its owner knows it by `path`. No GSO, GRO, ECN
/// or control messages: a batch leaves one datagram per system call, and a full peer queue
/// (EAGAIN) is backpressure, as a full UDP send buffer is.
///
/// Confined to one thread (its event loop).
package final class UnixDatagramSocket: DatagramSocket {
    /// What the channel is told the peer's address is.
    package static let remote = SocketAddress(ip: "100::1", port: 1)!
    /// What the channel is told the socket's own address is.
    package static let local = SocketAddress(ip: "100::2", port: 1)!
    /// Datagrams queued at most before a flush.
    private static let queueLimit = 256
    /// Senders a server keeps names for; past it, the oldest name is forgotten (its channel's
    /// answers are dropped, and its next datagram makes a new peer). Far above a listener's
    /// default connection limit.
    private static let peerLimit = 65_536

    package let fd: Int32
    /// The server's socket file.
    package let path: UnixSocketPath
    package var localAddress: SocketAddress { Self.local }
    package private(set) var counters = SocketCounters()
    private var queued: [(to: SocketAddress, bytes: [UInt8])] = []
    /// A server's socket file as it was bound (removed on close while it is still that file);
    /// nil for a client.
    private let bound: (device: UInt64, inode: UInt64)?
    /// A server's senders: each name (its `sockaddr_un` path bytes; empty for an unnamed
    /// sender, which cannot be answered) and the address it is known by, both ways, and the
    /// order they came in.
    private var addresses: [[UInt8]: SocketAddress] = [:]
    private var names: [SocketAddress: [UInt8]] = [:]
    private var arrivalOrder: [SocketAddress] = []
    private var oldest = 0
    private var nextPeer: UInt64 = 1
    private let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: UDPSocket.segmentSlotBytes, alignment: 16)
    private var isOpen = true

    /// Opens a datagram socket with a name of its own (the kernel's autobind, so the server
    /// can answer) and connects it to `path`: ENOENT (no socket file), ECONNREFUSED (nobody
    /// bound there), EPROTOTYPE (a stream socket is there).
    package init(connectingTo path: UnixSocketPath) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DatapathError.system("socket(AF_UNIX, SOCK_DGRAM)", errno) }
        var family = sa_family_t(AF_UNIX)
        let named = withUnsafePointer(to: &family) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size)) }
        }
        guard named == 0 else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("bind(AF_UNIX autobind)", error)
        }
        guard path.withSockAddr({ Glibc.connect(fd, $0, $1) }) == 0 else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("connect(\(path))", error)
        }
        self.fd = fd
        self.path = path
        bound = nil
    }

    /// Binds a server's socket at `path`, replacing a stale socket file (see
    /// `UnixSocketPath.removeStaleSocketFile`); `close` removes the file.
    package init(bindingTo path: UnixSocketPath) throws {
        _ = try path.removeStaleSocketFile(type: Int32(SOCK_DGRAM.rawValue))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DatapathError.system("socket(AF_UNIX, SOCK_DGRAM)", errno) }
        guard path.withSockAddr({ bind(fd, $0, $1) }) == 0, let identity = path.socketFileIdentity() else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("bind(\(path))", error)
        }
        self.fd = fd
        self.path = path
        bound = identity
    }

    /// The address a server knows the sender `name` by, made on its first datagram.
    private func address(of name: [UInt8]) -> SocketAddress {
        if let known = addresses[name] { return known }
        if addresses.count >= Self.peerLimit {
            let forgotten = arrivalOrder[oldest]
            oldest += 1
            if let name = names.removeValue(forKey: forgotten) { addresses[name] = nil }
            if oldest >= Self.peerLimit {
                arrivalOrder.removeFirst(oldest)
                oldest = 0
            }
        }
        var storage = sockaddr_in6()
        storage.sin6_family = sa_family_t(AF_INET6)
        storage.sin6_port = UInt16(1).bigEndian
        withUnsafeMutableBytes(of: &storage.sin6_addr) { bytes in
            bytes[0] = 0x01
            withUnsafeBytes(of: nextPeer.bigEndian) { bytes[8..<16].copyBytes(from: $0) }
        }
        nextPeer += 1
        var made = SocketAddress.unspecified
        made.storage = storage
        addresses[name] = made
        names[made] = name
        arrivalOrder.append(made)
        return made
    }

    deinit {
        close()
        slot.deallocate()
    }

    package var canEnqueue: Bool { queued.count < Self.queueLimit }

    package var freeSlot: UnsafeMutableRawBufferPointer? { canEnqueue ? slot : nil }

    package func commitSlot(_ metadata: DatagramMetadata, segmentSize: Int, length: Int) {
        enqueue(metadata, segmentSize: segmentSize, bytes: UnsafeRawBufferPointer(rebasing: slot[0..<length]))
    }

    package func enqueue(_ metadata: DatagramMetadata, segmentSize: Int, bytes: UnsafeRawBufferPointer) {
        // A batch is datagrams of `segmentSize` bytes laid end to end (the last may be shorter).
        UDPSegmentation.forEachSegment(of: bytes, segmentSize: max(segmentSize, 1)) { queued.append((metadata.remote, Array($0))) }
    }

    @discardableResult package func flush() -> Bool {
        guard isOpen else {
            queued.removeAll()
            return true
        }
        var sent = 0
        defer { queued.removeFirst(sent) }
        for (destination, datagram) in queued {
            var result: Int
            if bound == nil {
                counters.sendmsgCalls += 1
                result = datagram.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            } else if let name = names[destination], !name.isEmpty {
                counters.sendmsgCalls += 1
                result = Self.withAddress(name) { address, length in
                    datagram.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
                }
            } else {
                // A sender without a name (or forgotten): it cannot be answered.
                errno = EDESTADDRREQ
                result = -1
            }
            if result >= 0 {
                counters.datagramsSent += 1
                counters.bytesSent += UInt64(result)
            } else if bound == nil && (errno == EAGAIN || errno == EWOULDBLOCK) {
                // The server's queue is full: wait until writable (a connected socket is
                // told when that queue has room).
                return false
            } else if errno == EINTR {
                return false
            } else {
                // Too large (EMSGSIZE), the peer gone (ECONNREFUSED), or, from a server, a
                // client's queue full (EAGAIN: an unconnected socket is never told when one
                // client's queue has room, so waiting would spin): dropped, as UDP drops what
                // a receiver has no room for.
                counters.sendErrors += 1
            }
            sent += 1
        }
        return true
    }

    @discardableResult package func receive(_ body: (UnsafeRawBufferPointer, DatagramMetadata) -> Void) -> Bool {
        guard isOpen else { return false }
        var any = false
        for _ in 0..<32 {
            counters.recvmsgCalls += 1
            var sender = sockaddr_un()
            var senderLength = socklen_t(MemoryLayout<sockaddr_un>.size)
            // MSG_TRUNC: the datagram's whole length, so one larger than the slot is seen.
            let length = withUnsafeMutablePointer(to: &sender) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, slot.baseAddress, slot.count, Int32(MSG_TRUNC), $0, &senderLength)
                }
            }
            guard length >= 0 else { break }
            any = true
            guard length <= slot.count else {
                counters.truncatedMessages += 1
                continue
            }
            counters.datagramsReceived += 1
            counters.bytesReceived += UInt64(length)
            var remote = Self.remote
            if bound != nil {
                // The name is what follows the family, as long as the kernel says (an abstract
                // name starts with a NUL byte; an unnamed sender has none).
                let nameLength = max(0, Int(senderLength) - MemoryLayout<sa_family_t>.size)
                let name = withUnsafeBytes(of: &sender.sun_path) { Array($0.prefix(nameLength)) }
                remote = address(of: name)
            }
            body(UnsafeRawBufferPointer(rebasing: slot[0..<length]), DatagramMetadata(remote: remote, local: Self.local, ecn: .notECT))
        }
        return any
    }

    package func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        try context.register(handler, fd: fd)
    }

    package func close() {
        guard isOpen else { return }
        isOpen = false
        Glibc.close(fd)
        if let bound, let now = path.socketFileIdentity(), now == bound { unlink(path.path) }
    }

    /// Calls `body` with the `sockaddr_un` of the sender `name`.
    private static func withAddress<R>(_ name: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name.prefix($0.count)) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + min(name.count, MemoryLayout.size(ofValue: address.sun_path)))
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }
}
