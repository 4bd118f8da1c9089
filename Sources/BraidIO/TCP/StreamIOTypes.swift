import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// What one read of a byte stream found.
public enum StreamReadResult: Sendable, Hashable {
    /// This many bytes (at least 1) were read into the caller's memory.
    case bytes(Int)
    /// Nothing waiting: read again once the socket is readable.
    case wouldBlock
    /// The peer will send nothing more (its FIN arrived, all its bytes have been read). It
    /// may still be reading what we send.
    case endOfStream
}

/// The regions of one gathered write, laid out in memory the socket owns (no allocation per
/// write). Filled inside the socket's `write` closure; not copyable, so it cannot outlive it.
///
/// ```swift
/// let written = try socket.write { regions in
///     _ = regions.append(header)
///     _ = regions.append(body)
/// }
/// ```
public struct WriteRegions: ~Copyable {
    private let storage: UnsafeMutablePointer<iovec>
    /// Regions one write takes at most.
    public let capacity: Int
    /// Regions appended so far.
    public private(set) var count = 0
    /// Bytes in the regions appended so far.
    public private(set) var byteCount = 0

    /// Regions laid out in `storage` (room for `capacity` iovecs), for a socket to hand to `fill`.
    package init(storage: UnsafeMutablePointer<iovec>, capacity: Int) {
        self.storage = storage
        self.capacity = capacity
    }

    public var isFull: Bool { count == capacity }

    /// Adds `region` to the write; false (and nothing added) when the write already holds
    /// `capacity` regions. An empty region takes no place. The memory must stay valid until
    /// `write` returns; the kernel copies from it during the call.
    @discardableResult
    public mutating func append(_ region: UnsafeRawBufferPointer) -> Bool {
        guard region.count > 0 else { return true }
        guard count < capacity else { return false }
        storage[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: region.baseAddress), iov_len: region.count)
        count += 1
        byteCount += region.count
        return true
    }

    /// The regions as the kernel takes them.
    package var iovecs: UnsafeBufferPointer<iovec> { UnsafeBufferPointer(start: storage, count: count) }
}

extension DatapathError {
    /// The system's reason (errno), for `.system`.
    public var systemErrorCode: Int32? {
        if case .system(_, let code) = self { return code }
        return nil
    }

    /// The peer reset the connection (ECONNRESET), or it was already reset or shut down when
    /// we wrote (EPIPE): Network.framework's "connection reset by peer".
    public var isResetByPeer: Bool { systemErrorCode == ECONNRESET || systemErrorCode == EPIPE }

    /// The process or the system ran out of descriptors or socket memory (EMFILE, ENFILE,
    /// ENOBUFS, ENOMEM): retry later rather than at once.
    public var isResourceExhaustion: Bool {
        guard let code = systemErrorCode else { return false }
        return code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM
    }
}
