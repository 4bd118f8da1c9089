import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking TCP (or MPTCP) connection's socket on an event loop: reads into the caller's
/// memory, gathered writes (several regions, one system call), half-close, and every system
/// call counted in `counters`. Nothing allocates per read or write.
///
/// Hand-written rather than taken from a library: nothing available does non-blocking TCP on
/// our own epoll loops with exact per-syscall counting (SwiftNIO is not a dependency, and its
/// channel pipeline would add its own loop and allocations per read).
///
/// Confined to one thread (its event loop). Lifecycle: `connect` (or a listener's `accept`),
/// `register`, wait for writable, `finishConnect`, then reads and writes as the loop reports
/// readiness; `shutdownWrite` to half-close; `close` (also on deinit).
public final class TCPSocket {
    public let fd: Int32
    /// The peer's address.
    public let remoteAddress: SocketAddress
    /// Our address (the port the kernel chose for a client).
    public private(set) var localAddress: SocketAddress
    /// True when the socket is an MPTCP socket (`multipath` was asked for and the kernel agreed);
    /// `multipathInEffect` tells whether the connection still is, once established.
    public let isMultipath: Bool
    /// The options applied when the socket was made or accepted.
    public let options: TCPOptions
    /// Options the MPTCP layer does not support and that were left unset (multipath sockets
    /// only; the names of their setsockopt constants).
    public let unsupportedOptions: [String]
    public private(set) var counters = SocketCounters()
    /// True from `connect` until `finishConnect` confirms the connection.
    public private(set) var isConnecting: Bool
    /// A fast open client that holds a cookie: `connect` sent nothing, and the first write
    /// sends the SYN with its bytes. Until then the peer knows nothing of the connection, so
    /// the owner must write before it waits to read.
    public private(set) var connectDeferredUntilWrite: Bool
    public private(set) var isOpen = true
    /// The socket file of a Unix-domain stream socket (the one connected to, or the
    /// listener's); nil for TCP. Such a socket's addresses are `SocketAddress.unspecified`.
    public let unixPath: String?

    /// Regions one `write` takes at most (the socket owns room for this many iovecs).
    public static let maxWriteRegions = 64

    private let writeVector: UnsafeMutablePointer<iovec>
    private weak var context: LoopContext?
    private var token: UInt64?

    private init(
        fd: Int32, remote: SocketAddress, local: SocketAddress, isMultipath: Bool, options: TCPOptions, unsupported: [String],
        connecting: Bool, deferred: Bool, counters: SocketCounters, unixPath: String? = nil
    ) {
        self.fd = fd
        self.unixPath = unixPath
        remoteAddress = remote
        localAddress = local
        self.isMultipath = isMultipath
        self.options = options
        unsupportedOptions = unsupported
        isConnecting = connecting
        connectDeferredUntilWrite = deferred
        self.counters = counters
        writeVector = .allocate(capacity: Self.maxWriteRegions)
    }

    deinit {
        close()
        writeVector.deallocate()
    }

    // MARK: - Making

    /// Opens a non-blocking socket toward `remote` and starts connecting: returns at once,
    /// with the SYN on its way (or, for a fast open client holding a cookie, deferred until
    /// the first write: `connectDeferredUntilWrite`). Register it, wait until writable, then
    /// call `finishConnect`.
    /// - Parameters:
    ///   - local: an address (and port) to bind first; nil lets the kernel choose.
    /// - Throws: `DatapathError.system` for a failure known at once (no route: ENETUNREACH,
    ///   a local address this machine lacks: EADDRNOTAVAIL...).
    public static func connect(to remote: SocketAddress, from local: SocketAddress? = nil, options: TCPOptions = TCPOptions())
        throws -> TCPSocket
    {
        var counters = SocketCounters()
        let (fd, multipath) = try openStreamSocket(ipv6: remote.isIPv6, multipath: options.multipath, calls: &counters.controlCalls)
        do {
            let unsupported = try options.apply(
                to: fd, isIPv6: remote.isIPv6, multipath: multipath, role: .client, calls: &counters.controlCalls)
            if let local {
                counters.controlCalls += 1
                guard local.withSockAddr({ bind(fd, $0, socklen_t($1)) }) == 0 else {
                    throw DatapathError.system("bind(\(local))", errno)
                }
            }
            var result: Int32
            repeat {
                counters.controlCalls += 1
                result = remote.withSockAddr { Glibc.connect(fd, $0, socklen_t($1)) }
            } while result != 0 && errno == EINTR
            let connecting: Bool
            if result == 0 {
                // Connected at once, or (fast open with a cookie) deferred until the first write.
                connecting = false
            } else if errno == EINPROGRESS {
                connecting = true
            } else {
                throw DatapathError.system("connect(\(remote))", errno)
            }
            let local = try boundAddress(fd, calls: &counters.controlCalls)
            return TCPSocket(
                fd: fd, remote: remote, local: local, isMultipath: multipath, options: options, unsupported: unsupported,
                connecting: connecting, deferred: !connecting && options.fastOpen, counters: counters)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Opens a non-blocking Unix-domain stream socket connected to `path`. Such a connect
    /// completes or fails at once: ENOENT (no socket file there), ECONNREFUSED (a socket file
    /// nobody listens on), EAGAIN (the listener's backlog is full), EACCES. TCP's options
    /// mean nothing on it and none is set.
    package static func connect(toUnixPath path: UnixSocketPath) throws -> TCPSocket {
        var counters = SocketCounters()
        counters.controlCalls += 1
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DatapathError.system("socket(AF_UNIX)", errno) }
        var result: Int32
        repeat {
            counters.controlCalls += 1
            result = path.withSockAddr { Glibc.connect(fd, $0, $1) }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("connect(\(path))", error)
        }
        return TCPSocket(
            fd: fd, remote: .unspecified, local: .unspecified, isMultipath: false, options: TCPOptions(), unsupported: [],
            connecting: false, deferred: false, counters: counters, unixPath: path.path)
    }

    /// Wraps a socket a Unix-domain listener on `path` accepted (already non-blocking).
    static func accepted(fd: Int32, unixPath path: String) -> TCPSocket {
        TCPSocket(
            fd: fd, remote: .unspecified, local: .unspecified, isMultipath: false, options: TCPOptions(), unsupported: [],
            connecting: false, deferred: false, counters: SocketCounters(), unixPath: path)
    }

    /// Wraps a socket a listener accepted (already non-blocking), applying `options`.
    static func accepted(
        fd: Int32, remote: SocketAddress, isMultipath: Bool, options: TCPOptions, counters: inout SocketCounters
    ) throws -> TCPSocket {
        var own = SocketCounters()
        do {
            let unsupported = try options.apply(
                to: fd, isIPv6: remote.isIPv6, multipath: isMultipath, role: .accepted(mappedIPv4: remote.isIPv4Mapped),
                calls: &own.controlCalls)
            let local = try boundAddress(fd, calls: &own.controlCalls)
            // A dual-stack listener's IPv4 clients are reported as IPv4, not ::ffff:a.b.c.d.
            return TCPSocket(
                fd: fd, remote: remote.unmappingIPv4, local: local.unmappingIPv4, isMultipath: isMultipath, options: options,
                unsupported: unsupported, connecting: false, deferred: false, counters: own)
        } catch {
            own.controlCalls += 1
            Glibc.close(fd)
            counters.controlCalls += own.controlCalls
            throw error
        }
    }

    /// A non-blocking, close-on-exec stream socket: MPTCP when asked and the kernel agrees,
    /// else TCP. Returns the descriptor and whether it is MPTCP.
    static func openStreamSocket(ipv6: Bool, multipath: Bool, calls: inout UInt64) throws -> (Int32, Bool) {
        let family = ipv6 ? AF_INET6 : AF_INET
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if multipath {
            calls += 1
            let fd = socket(family, type, LinuxTCP.ipprotoMPTCP)
            if fd >= 0 { return (fd, true) }
            // No MPTCP here (not built, or net.mptcp.enabled=0): plain TCP, as Network.framework does.
            let error = errno
            guard error == EPROTONOSUPPORT || error == ENOPROTOOPT || error == EINVAL || error == EAFNOSUPPORT else {
                throw DatapathError.system("socket(IPPROTO_MPTCP)", error)
            }
        }
        calls += 1
        let fd = socket(family, type, Int32(IPPROTO_TCP))
        guard fd >= 0 else { throw DatapathError.system("socket", errno) }
        return (fd, false)
    }

    static func boundAddress(_ fd: Int32, calls: inout UInt64) throws -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        calls += 1
        guard withUnsafeMutableBytes(of: &storage, { getsockname(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) }) == 0
        else { throw DatapathError.system("getsockname", errno) }
        return SocketAddress(storage: storage)
    }

    // MARK: - Connecting

    /// Completes a connect once the socket has turned writable (or reported an error): reads
    /// SO_ERROR. Throws `DatapathError.system("connect(<remote>)", errno)`: ECONNREFUSED
    /// (nobody listens there), ETIMEDOUT (no answer), ENETUNREACH / EHOSTUNREACH (no path),
    /// so a caller can tell a refusal from a missing path. Does nothing once connected.
    public func finishConnect() throws {
        guard isConnecting else { return }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        counters.controlCalls += 1
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else {
            throw DatapathError.system("getsockopt(SO_ERROR)", errno)
        }
        guard error == 0 else { throw DatapathError.system("connect(\(remoteAddress))", error) }
        isConnecting = false
    }

    /// For an MPTCP socket, once connected: whether the connection still runs MPTCP (false
    /// when it fell back to TCP, e.g. the peer does not speak MPTCP). One getsockopt
    /// (SOL_MPTCP, MPTCP_INFO). Always false for a TCP socket.
    public func multipathInEffect() -> Bool {
        guard isMultipath, isOpen else { return false }
        // struct mptcp_info starts with six u8 counters, then u32 mptcpi_flags at offset 8.
        var info = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var length = socklen_t(MemoryLayout.size(ofValue: info))
        counters.controlCalls += 1
        let result = withUnsafeMutableBytes(of: &info) { getsockopt(fd, LinuxTCP.solMPTCP, LinuxTCP.mptcpInfo, $0.baseAddress, &length) }
        // A fallen-back socket hands SOL_MPTCP to TCP, which refuses it, or reports nothing.
        guard result == 0, length >= 12 else { return false }
        let flags = withUnsafeBytes(of: &info) { $0.load(fromByteOffset: 8, as: UInt32.self) }
        return flags & LinuxTCP.mptcpInfoFlagFallback == 0
    }

    /// The kernel's segment counts (one getsockopt of TCP_INFO), read once as the connection
    /// ends; nil for a Unix-domain or closed socket.
    package func segmentCounts() -> TCPSegmentCounts? {
        guard isOpen, unixPath == nil else { return nil }
        // struct tcp_info (linux/tcp.h), read as bytes: Glibc's copy of the struct stops before
        // the segment counters. tcpi_total_retrans is the u32 at offset 100, tcpi_segs_out and
        // tcpi_segs_in the u32s at 136 and 140.
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        counters.controlCalls += 1
        let result = info.withUnsafeMutableBytes { getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        guard result == 0, length >= 144 else { return nil }
        return info.withUnsafeBytes { bytes in
            TCPSegmentCounts(
                sent: UInt64(bytes.loadUnaligned(fromByteOffset: 136, as: UInt32.self)),
                received: UInt64(bytes.loadUnaligned(fromByteOffset: 140, as: UInt32.self)),
                retransmitted: UInt64(bytes.loadUnaligned(fromByteOffset: 100, as: UInt32.self)))
        }
    }

    // MARK: - Reading and writing

    /// One recv into `buffer` (not empty): the bytes read, `.wouldBlock`, or `.endOfStream`.
    /// Throws `DatapathError.system("recv", ECONNRESET)` when the peer reset the connection
    /// (`isResetByPeer`), ETIMEDOUT when keep-alive or the user timeout gave up.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> StreamReadResult {
        precondition(buffer.count > 0, "a read needs room")
        // A closed socket's descriptor number may already belong to another file.
        guard isOpen else { throw DatapathError.system("recv", EBADF) }
        while true {
            counters.recvCalls += 1
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 {
                counters.bytesReceived += UInt64(count)
                return .bytes(count)
            }
            if count == 0 {
                counters.readEndOfStream += 1
                return .endOfStream
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                counters.readWouldBlock += 1
                return .wouldBlock
            case let error: throw DatapathError.system("recv", error)
            }
        }
    }

    /// One gathered write (sendmsg with MSG_NOSIGNAL, i.e. writev without SIGPIPE) of up to
    /// `maxWriteRegions` regions that `fill` appends, in order. Returns the bytes the kernel
    /// took: all, a prefix (the socket buffer filled: write the rest once writable), or 0
    /// (full, or still connecting). Throws `DatapathError.system("sendmsg", EPIPE or
    /// ECONNRESET)` when the connection is gone (`isResetByPeer`).
    public func write(_ fill: (inout WriteRegions) throws -> Void) throws -> Int {
        var regions = WriteRegions(storage: writeVector, capacity: Self.maxWriteRegions)
        try fill(&regions)
        return try write(regions.iovecs)
    }

    /// One write of one region.
    public func write(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        try write { $0.append(bytes) }
    }

    /// One gathered write of regions the caller laid out (at most IOV_MAX, 1024).
    public func write(_ regions: UnsafeBufferPointer<iovec>) throws -> Int {
        guard isOpen else { throw DatapathError.system("sendmsg", EBADF) }
        var total = 0
        for region in regions { total += region.iov_len }
        // Nothing to send costs no call.
        guard total > 0 else { return 0 }
        var message = msghdr()
        message.msg_iov = UnsafeMutablePointer(mutating: regions.baseAddress)
        message.msg_iovlen = regions.count
        while true {
            counters.sendmsgCalls += 1
            let sent = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
            if sent >= 0 {
                counters.bytesSent += UInt64(sent)
                counters.regionsWritten += UInt64(regions.count)
                if sent < total { counters.partialWrites += 1 }
                if sent == 0 { counters.writeWouldBlock += 1 }
                connectDeferredUntilWrite = false
                return sent
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, EINPROGRESS:
                // EINPROGRESS: a fast open write that sent the SYN without data (no cookie yet).
                if errno == EINPROGRESS { connectDeferredUntilWrite = false }
                counters.writeWouldBlock += 1
                return 0
            case let error: throw DatapathError.system("sendmsg", error)
            }
        }
    }

    /// Half-close: sends FIN after what is queued. The peer reads end of stream and may keep
    /// sending; we keep reading.
    public func shutdownWrite() throws {
        guard isOpen else { throw DatapathError.system("shutdown", EBADF) }
        counters.controlCalls += 1
        guard shutdown(fd, Int32(SHUT_WR)) == 0 else { throw DatapathError.system("shutdown", errno) }
    }

    /// Leaves the loop (if registered) and closes the descriptor. Unread received data makes
    /// the kernel send a reset instead of a FIN, as always with TCP.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let token, let context { context.deregister(token) }
        token = nil
        counters.controlCalls += 1
        Glibc.close(fd)
    }

    /// Closes with a reset (SO_LINGER 0): the peer's next read or write fails with
    /// ECONNRESET. For aborting a connection.
    public func abort() {
        guard isOpen else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        counters.controlCalls += 1
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    // MARK: - On the loop

    /// Has `handler` told when the socket is readable (from now on) or writable (on
    /// `setWantsWritable(true)`); returns the handler's token, which carries its timer too.
    /// Registering again on the same loop hands the socket over to `handler` (a connect
    /// attempt's socket going to the connection that won): same token, interests and timer.
    public func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        if let token, self.context === context {
            context.replaceHandler(token, with: handler)
            return token
        }
        precondition(token == nil, "a socket is registered on one loop")
        let token = try context.register(handler, fd: fd)
        self.context = context
        self.token = token
        return token
    }

    /// Turns the handler's readability interest off (the application stopped reading: the
    /// kernel's buffer fills and TCP's window stops the peer) or back on.
    public func setWantsReadable(_ wants: Bool) {
        guard let token, let context else { return }
        context.setWantsReadable(token, wants)
    }

    /// Asks to hear when the socket turns writable (a connect finished, or a full send
    /// buffer drained), or stops asking.
    public func setWantsWritable(_ wants: Bool) {
        guard let token, let context else { return }
        context.setWantsWritable(token, wants)
    }
}
