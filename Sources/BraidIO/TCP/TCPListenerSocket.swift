import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking listening TCP (or MPTCP) socket on an event loop: accepts connections as
/// `TCPSocket`s with the listener's per-connection options applied. Several loops can each
/// listen on the same port with their own socket (`reusePort`); the kernel spreads incoming
/// connections across them.
///
/// Hand-written for the same reason as `TCPSocket`: our own epoll loops, exact syscall counts.
///
/// Descriptor exhaustion: when accept4 fails with EMFILE, ENFILE, ENOBUFS or ENOMEM, the
/// connection stays in the kernel's backlog and the listener, being level-triggered, would be
/// reported readable again at once and spin the loop. So `accept` turns the listener's read
/// interest off for `exhaustionBackoff` (a loop timer turns it back on), counts the pause in
/// `acceptPauses` and returns nil. Waiting connections are kept, not dropped; when the backlog
/// overflows meanwhile, the kernel drops SYNs and the clients retransmit.
///
/// Confined to one thread (its event loop).
public final class TCPListenerSocket {
    public let fd: Int32
    /// The bound address (with the port the kernel chose when 0 was asked for).
    public let localAddress: SocketAddress
    /// True when the listener is an MPTCP socket (multipath asked for and granted); it accepts
    /// MPTCP and plain TCP clients alike.
    public let isMultipath: Bool
    /// Applied to each accepted connection.
    public let options: TCPOptions
    /// How long the listener stops accepting after running out of descriptors or memory.
    public var exhaustionBackoff: Duration = .milliseconds(100)
    public private(set) var counters = SocketCounters()
    public private(set) var isOpen = true
    /// Options the MPTCP layer does not support on the listener and that were left unset.
    public let unsupportedOptions: [String]
    /// A Unix-domain listener's socket file (nil for TCP), with the device and inode it had
    /// when bound: `close` removes the file only while it is still this listener's.
    private let unixSocket: (path: UnixSocketPath, device: UInt64, inode: UInt64)?
    /// A Unix-domain listener's socket file; nil for TCP.
    public var unixPath: String? { unixSocket?.path.path }

    /// Test hook: while set, accept4 is not called and fails with this errno instead (to
    /// exercise the exhaustion pause without exhausting the process's descriptors, which
    /// other tests share).
    package var injectedAcceptError: Int32?

    private weak var context: LoopContext?
    private var token: UInt64?
    private var pauseTimer: UInt64?

    /// Opens, binds and listens.
    /// - Parameters:
    ///   - address: IPv4 or IPv6, a wildcard (0.0.0.0, ::) or one address; port 0 picks one.
    ///     An IPv6 wildcard listener accepts IPv4 clients too (IPV6_V6ONLY off, whatever
    ///     net.ipv6.bindv6only says), reported as plain IPv4 addresses.
    ///   - options: per-connection options for accepted sockets; also `multipath` (an MPTCP
    ///     listener, TCP when the kernel refuses), `fastOpen` (TCP_FASTOPEN with
    ///     `fastOpenQueueLength`) and the buffer sizes (set before listen).
    ///   - reusePort: SO_REUSEPORT, so other sockets (one per loop) can listen on this port.
    ///   - backlog: connections the kernel completes before we accept them (capped by
    ///     net.core.somaxconn).
    public init(
        bindTo address: SocketAddress, options: TCPOptions = TCPOptions(), reusePort: Bool = false, backlog: Int = 1024,
        fastOpenQueueLength: Int = 256
    ) throws {
        var counters = SocketCounters()
        let (fd, multipath) = try TCPSocket.openStreamSocket(
            ipv6: address.isIPv6, multipath: options.multipath, calls: &counters.controlCalls)
        do {
            func set(_ name: Int32, _ what: String) throws {
                var one: Int32 = 1
                counters.controlCalls += 1
                guard setsockopt(fd, SOL_SOCKET, name, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                    throw DatapathError.system("setsockopt(\(what))", errno)
                }
            }
            // A restarted server binds again while old connections sit in TIME_WAIT.
            try set(SO_REUSEADDR, "SO_REUSEADDR")
            if reusePort { try set(SO_REUSEPORT, "SO_REUSEPORT") }
            if address.isIPv6 && address.isWildcard { try DualStack.acceptIPv4(on: fd) }
            unsupportedOptions = try options.apply(
                to: fd, isIPv6: address.isIPv6, multipath: multipath, role: .listener(fastOpenQueue: fastOpenQueueLength),
                calls: &counters.controlCalls)
            counters.controlCalls += 1
            guard address.withSockAddr({ bind(fd, $0, socklen_t($1)) }) == 0 else {
                throw DatapathError.system("bind(\(address))", errno)
            }
            counters.controlCalls += 1
            guard listen(fd, Int32(clamping: backlog)) == 0 else { throw DatapathError.system("listen", errno) }
            localAddress = try TCPSocket.boundAddress(fd, calls: &counters.controlCalls)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        isMultipath = multipath
        self.options = options
        self.counters = counters
        unixSocket = nil
    }

    /// Binds a Unix-domain stream socket at `path` and listens. A socket file someone left
    /// there (a listener that is gone: connecting to it is refused) is removed first, as a
    /// restarted server expects; a socket someone still listens on fails with EADDRINUSE, and
    /// a file that is not a socket (a regular file, a directory) is never removed: EADDRINUSE
    /// too. `close` removes the socket file, if it is still the one this listener made.
    package init(unixPath path: UnixSocketPath, backlog: Int = 1024) throws {
        var counters = SocketCounters()
        counters.controlCalls += try path.removeStaleSocketFile(type: Int32(SOCK_STREAM.rawValue))
        counters.controlCalls += 1
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DatapathError.system("socket(AF_UNIX)", errno) }
        counters.controlCalls += 2
        guard path.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("bind(\(path))", error)
        }
        guard listen(fd, Int32(clamping: backlog)) == 0, let identity = path.socketFileIdentity() else {
            let error = errno
            Glibc.close(fd)
            unlink(path.path)
            throw DatapathError.system("listen(\(path))", error)
        }
        self.fd = fd
        localAddress = .unspecified
        isMultipath = false
        options = TCPOptions()
        unsupportedOptions = []
        self.counters = counters
        unixSocket = (path, identity.device, identity.inode)
    }

    deinit { close() }

    /// Accepts one waiting connection: a non-blocking, close-on-exec socket with the
    /// listener's options applied, or nil when none is waiting (or when accepting is paused
    /// after running out of descriptors, see the type's notes). Call until nil when readable.
    /// Throws for other failures of accept4 (the listener carries on) and when applying the
    /// options fails (that connection is closed).
    public func accept() throws -> TCPSocket? {
        guard isOpen else { throw DatapathError.system("accept4", EBADF) }
        while true {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd: Int32
            if let injected = injectedAcceptError {
                // Not a system call, so not counted.
                errno = injected
                fd = -1
            } else {
                counters.acceptCalls += 1
                fd = braid_accept4(self.fd, &storage, &length)
            }
            if fd >= 0, let unixSocket {
                return TCPSocket.accepted(fd: fd, unixPath: unixSocket.path.path)
            }
            if fd >= 0 {
                return try TCPSocket.accepted(
                    fd: fd, remote: SocketAddress(storage: storage), isMultipath: isMultipath, options: options,
                    counters: &counters)
            }
            let error = errno
            switch error {
            case EINTR, ECONNABORTED:
                // ECONNABORTED: that connection was reset while waiting; take the next.
                continue
            case EAGAIN, EWOULDBLOCK:
                counters.acceptWouldBlock += 1
                return nil
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                pauseAccepting()
                return nil
            default:
                throw DatapathError.system("accept4", error)
            }
        }
    }

    /// Stops watching the listener for `exhaustionBackoff`, so a connection it cannot accept
    /// does not make the level-triggered loop report it readable over and over.
    private func pauseAccepting() {
        counters.acceptPauses += 1
        guard let context, let token, pauseTimer == nil else { return }
        context.setWantsReadable(token, false)
        pauseTimer = context.schedule(at: context.now + exhaustionBackoff) { [weak self] context in
            guard let self else { return }
            pauseTimer = nil
            guard isOpen, let token = self.token else { return }
            context.setWantsReadable(token, true)
        }
    }

    /// True while accepting is paused after running out of descriptors.
    public var isPaused: Bool { pauseTimer != nil }

    /// Has `handler` told when connections wait (`readable`); returns the handler's token.
    public func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        precondition(token == nil, "a listener is registered once")
        let token = try context.register(handler, fd: fd)
        self.context = context
        self.token = token
        return token
    }

    /// Leaves the loop (if registered) and closes the socket; connections already accepted
    /// are not affected, those still waiting are reset.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let context {
            if let pauseTimer { context.deregister(pauseTimer) }
            if let token { context.deregister(token) }
        }
        pauseTimer = nil
        token = nil
        counters.controlCalls += 1
        Glibc.close(fd)
        if let unixSocket, let now = unixSocket.path.socketFileIdentity(), now.device == unixSocket.device,
            now.inode == unixSocket.inode
        {
            counters.controlCalls += 1
            unlink(unixSocket.path.path)
        }
    }
}
