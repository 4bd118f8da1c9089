import BraidCore

#if canImport(Glibc)
import Glibc
#endif

/// A client's Unix-domain datagram socket, connected to a server's socket file, behind the
/// same `DatagramSocket` vocabulary as `UDPSocket` so UDP's channel runs over it unchanged.
/// It has no IP addresses: it reports the peer as `remote` and itself as `local` (addresses
/// from the IPv6 discard prefix, 100::/64, which no packet ever carries), and its owner knows
/// it by `path`. No GSO, GRO, ECN or control messages: a batch leaves one datagram per
/// `send`, and a full peer queue (EAGAIN) is backpressure, as a full UDP send buffer is.
///
/// Confined to one thread (its event loop).
package final class UnixDatagramSocket: DatagramSocket {
    /// What the channel is told the peer's address is.
    package static let remote = SocketAddress(ip: "100::1", port: 1)!
    /// What the channel is told the socket's own address is.
    package static let local = SocketAddress(ip: "100::2", port: 1)!
    /// Datagrams queued at most before a flush.
    private static let queueLimit = 256

    package let fd: Int32
    /// The server's socket file.
    package let path: UnixSocketPath
    package var localAddress: SocketAddress { Self.local }
    package private(set) var counters = SocketCounters()
    private var queued: [[UInt8]] = []
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
        UDPSegmentation.forEachSegment(of: bytes, segmentSize: max(segmentSize, 1)) { queued.append(Array($0)) }
    }

    @discardableResult package func flush() -> Bool {
        guard isOpen else {
            queued.removeAll()
            return true
        }
        var sent = 0
        defer { queued.removeFirst(sent) }
        for datagram in queued {
            counters.sendmsgCalls += 1
            let result = datagram.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if result >= 0 {
                counters.datagramsSent += 1
                counters.bytesSent += UInt64(result)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                // The server's queue is full: wait until writable.
                return false
            } else if errno == EINTR {
                return false
            } else {
                // Too large (EMSGSIZE) or the server went away (ECONNREFUSED): dropped, as
                // UDP drops what cannot be delivered.
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
            // MSG_TRUNC: the datagram's whole length, so one larger than the slot is seen.
            let length = recv(fd, slot.baseAddress, slot.count, Int32(MSG_TRUNC))
            guard length >= 0 else { break }
            any = true
            guard length <= slot.count else {
                counters.truncatedMessages += 1
                continue
            }
            counters.datagramsReceived += 1
            counters.bytesReceived += UInt64(length)
            body(UnsafeRawBufferPointer(rebasing: slot[0..<length]), DatagramMetadata(remote: Self.remote, local: Self.local, ecn: .notECT))
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
    }
}
