#if canImport(Glibc)
import Glibc
#endif

/// What the drivers need of a datagram socket: `UDPSocket` on a real network, or a socket of an
/// in-memory network for tests on a virtual loop. The same batch vocabulary either way
/// (`DatagramMetadata`, send slots, segment sizes).
package protocol DatagramSocket: AnyObject {
    /// The bound address (with the port chosen when 0 was asked for).
    var localAddress: SocketAddress { get }
    var counters: SocketCounters { get }
    /// Room for another batch before a flush is needed.
    var canEnqueue: Bool { get }
    /// Memory for the next batch, written in place; nil when a flush is needed first.
    var freeSlot: UnsafeMutableRawBufferPointer? { get }
    /// Queues the batch written into `freeSlot`.
    func commitSlot(_ metadata: DatagramMetadata, segmentSize: Int, length: Int)
    /// Copies one batch into the send queue.
    func enqueue(_ metadata: DatagramMetadata, segmentSize: Int, bytes: UnsafeRawBufferPointer)
    /// Sends everything queued; false when the socket is full (wait until writable).
    @discardableResult func flush() -> Bool
    /// One receive round: each datagram to `body`; false when nothing was waiting.
    @discardableResult func receive(_ body: (UnsafeRawBufferPointer, DatagramMetadata) -> Void) -> Bool
    /// Has `handler` told when the socket is readable or writable; returns the handler's
    /// token, which carries its timer too.
    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64
    func close()
}

/// Where drivers get their sockets.
package protocol DatagramSocketFactory: Sendable {
    /// A socket bound to `address`.
    func bind(
        _ address: SocketAddress, batching: BatchingOptions, receiveSlots: Int, sendBatches: Int, reusePort: Bool
    ) throws -> any DatagramSocket
    /// The local address a socket would send from toward `remote` (port 0).
    func localAddress(toward remote: SocketAddress) throws -> SocketAddress
    /// The same factory with every socket bound to the interface `name` (SO_BINDTODEVICE), the
    /// address lookups limited to it too. Throws where sockets cannot be bound to interfaces.
    func boundToDevice(_ name: String) throws -> any DatagramSocketFactory
    /// The same factory with every socket marking its datagrams with the DSCP code point
    /// `dscp` (a service class). Throws where sockets cannot mark.
    func markingDSCP(_ dscp: UInt8) throws -> any DatagramSocketFactory
    /// A Unix-domain datagram socket connected to `path` (see `UnixDatagramSocket`).
    func connect(toUnixPath path: UnixSocketPath) throws -> any DatagramSocket
    /// A server's Unix-domain datagram socket bound to `path`.
    func bind(unixPath path: UnixSocketPath) throws -> any DatagramSocket
}

extension DatagramSocketFactory {
    /// Sockets that are not the kernel's have no interfaces to bind to.
    package func boundToDevice(_ name: String) throws -> any DatagramSocketFactory {
        throw DatapathError.system("SO_BINDTODEVICE \(name) on \(Self.self)", EOPNOTSUPP)
    }

    /// Networks without Unix-domain sockets (the tests' in-memory one) refuse them.
    package func connect(toUnixPath path: UnixSocketPath) throws -> any DatagramSocket {
        throw DatapathError.system("connect(\(path))", EAFNOSUPPORT)
    }

    package func bind(unixPath path: UnixSocketPath) throws -> any DatagramSocket {
        throw DatapathError.system("bind(\(path))", EAFNOSUPPORT)
    }

    /// Sockets that are not the kernel's carry no IP header to mark.
    package func markingDSCP(_ dscp: UInt8) throws -> any DatagramSocketFactory {
        throw DatapathError.system("IP_TOS \(dscp) on \(Self.self)", EOPNOTSUPP)
    }
}

extension UDPSocket: DatagramSocket {
    package func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        try context.register(handler, fd: fd)
    }
}

/// The machine's UDP sockets.
package struct UDPSockets: DatagramSocketFactory {
    /// The interface every socket is bound to (SO_BINDTODEVICE); nil: any.
    package let device: String?
    /// The DSCP code point every socket marks its datagrams with (0: none).
    package let dscp: UInt8

    package init(device: String? = nil, dscp: UInt8 = 0) {
        self.device = device
        self.dscp = dscp
    }

    package func bind(
        _ address: SocketAddress, batching: BatchingOptions, receiveSlots: Int, sendBatches: Int, reusePort: Bool
    ) throws -> any DatagramSocket {
        try UDPSocket(
            bindTo: address, batching: batching, receiveSlots: receiveSlots, sendBatches: sendBatches, reusePort: reusePort, device: device,
            dscp: dscp)
    }

    package func localAddress(toward remote: SocketAddress) throws -> SocketAddress {
        try UDPSocket.localAddress(toward: remote, device: device)
    }

    package func boundToDevice(_ name: String) throws -> any DatagramSocketFactory {
        UDPSockets(device: name, dscp: dscp)
    }

    package func markingDSCP(_ dscp: UInt8) throws -> any DatagramSocketFactory {
        UDPSockets(device: device, dscp: dscp)
    }

    /// A Unix-domain socket has no IP header to mark and no interface: `dscp` and `device`
    /// do not apply.
    package func connect(toUnixPath path: UnixSocketPath) throws -> any DatagramSocket {
        try UnixDatagramSocket(connectingTo: path)
    }

    package func bind(unixPath path: UnixSocketPath) throws -> any DatagramSocket {
        try UnixDatagramSocket(bindingTo: path)
    }
}
