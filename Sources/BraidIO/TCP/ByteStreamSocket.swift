#if canImport(Glibc)
import Glibc
#endif

/// What a byte-stream connection's owner needs of its socket: `TCPSocket` on a real network,
/// or an in-memory socket for tests on a virtual loop. Readiness reaches the registered
/// handler as `readable` / `writable`, level-triggered: reported again while it holds and the
/// interest is on.
package protocol ByteStreamSocket: AnyObject {
    var localAddress: SocketAddress { get }
    var remoteAddress: SocketAddress { get }
    /// A Unix-domain socket's socket file (nil for TCP; see `TCPSocket.unixPath`).
    var unixPath: String? { get }
    /// An MPTCP socket (see `TCPSocket.isMultipath`).
    var isMultipath: Bool { get }
    /// A fast open client that has sent nothing yet: its first write sends the SYN.
    var connectDeferredUntilWrite: Bool { get }
    var counters: SocketCounters { get }
    /// After the first `writable`: confirms the connection or throws why it failed
    /// (`DatapathError.system("connect(...)", ECONNREFUSED / ETIMEDOUT / ENETUNREACH ...)`).
    func finishConnect() throws
    /// Bytes into `buffer`, `.wouldBlock` or `.endOfStream`; throws `isResetByPeer` errors.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> StreamReadResult
    /// One gathered write of the regions `fill` appends; the bytes taken (0: full).
    func write(_ fill: (inout WriteRegions) throws -> Void) throws -> Int
    /// Half-close: the peer reads end of stream after our last byte.
    func shutdownWrite() throws
    /// Closes (leaving the loop); `abort` closes with a reset.
    func close()
    func abort()
    /// Has `handler` told about readiness; returns its token (which carries its timer too).
    /// Registering again on the same loop hands the registration to the new handler.
    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64
    /// Readability interest, on from `register`: off while the application does not read.
    func setWantsReadable(_ wants: Bool)
    /// Writability interest, off from `register`: on while connecting or after a short write.
    func setWantsWritable(_ wants: Bool)
    /// The kernel's segment counts for the connection (nil: not a TCP socket, or closed).
    func segmentCounts() -> TCPSegmentCounts?
}

extension ByteStreamSocket {
    package func segmentCounts() -> TCPSegmentCounts? { nil }
}

/// A TCP connection's segments as the kernel counted them (TCP_INFO).
package struct TCPSegmentCounts: Sendable, Hashable {
    package var sent: UInt64
    package var received: UInt64
    package var retransmitted: UInt64
}

/// What a listener's owner needs of its listening socket.
package protocol ByteStreamListener: AnyObject {
    var localAddress: SocketAddress { get }
    var counters: SocketCounters { get }
    /// One waiting connection, or nil when none waits (call until nil on `readable`).
    func acceptSocket() throws -> (any ByteStreamSocket)?
    /// Has `handler` told when connections wait; returns its token.
    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64
    func close()
}

/// Where byte-stream owners get their sockets: `TCPSockets` for real, an in-memory network in
/// tests.
package protocol ByteStreamSocketFactory: Sendable {
    /// A socket connecting to `remote` (see `TCPSocket.connect`).
    func connect(to remote: SocketAddress, from local: SocketAddress?, options: TCPOptions) throws -> any ByteStreamSocket
    /// A listener on `address` (see `TCPListenerSocket.init`).
    func listen(on address: SocketAddress, options: TCPOptions, reusePort: Bool, backlog: Int) throws -> any ByteStreamListener
    /// A Unix-domain stream socket connected to `path` (see `TCPSocket.connect(toUnixPath:)`).
    func connect(toUnixPath path: UnixSocketPath) throws -> any ByteStreamSocket
    /// A Unix-domain listener at `path` (see `TCPListenerSocket.init(unixPath:backlog:)`).
    func listen(onUnixPath path: UnixSocketPath, backlog: Int) throws -> any ByteStreamListener
}

extension ByteStreamSocketFactory {
    /// Networks without Unix-domain sockets (the tests' in-memory one) refuse them.
    package func connect(toUnixPath path: UnixSocketPath) throws -> any ByteStreamSocket {
        throw DatapathError.system("connect(\(path))", EAFNOSUPPORT)
    }

    package func listen(onUnixPath path: UnixSocketPath, backlog: Int) throws -> any ByteStreamListener {
        throw DatapathError.system("bind(\(path))", EAFNOSUPPORT)
    }
}

extension ByteStreamSocket {
    /// In-memory sockets are TCP's.
    package var unixPath: String? { nil }
}

extension TCPSocket: ByteStreamSocket {}

extension TCPListenerSocket: ByteStreamListener {
    package func acceptSocket() throws -> (any ByteStreamSocket)? { try accept() }
}

/// The machine's TCP sockets.
package struct TCPSockets: ByteStreamSocketFactory {
    package init() {}

    package func connect(to remote: SocketAddress, from local: SocketAddress?, options: TCPOptions) throws -> any ByteStreamSocket {
        try TCPSocket.connect(to: remote, from: local, options: options)
    }

    package func listen(on address: SocketAddress, options: TCPOptions, reusePort: Bool, backlog: Int) throws -> any ByteStreamListener {
        try TCPListenerSocket(bindTo: address, options: options, reusePort: reusePort, backlog: backlog)
    }

    package func connect(toUnixPath path: UnixSocketPath) throws -> any ByteStreamSocket {
        try TCPSocket.connect(toUnixPath: path)
    }

    package func listen(onUnixPath path: UnixSocketPath, backlog: Int) throws -> any ByteStreamListener {
        try TCPListenerSocket(unixPath: path, backlog: backlog)
    }
}
