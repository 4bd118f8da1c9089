import BraidIO
import Foundation

@testable import Braid
import BraidCore

/// An in-memory IP network for the sockets of one virtual loop: a datagram sent to an address
/// reaches the socket bound there (or bound to the wildcard on that port) after `delay`, none
/// overtaking another; one sent to an address nobody holds vanishes, as on a real network.
/// With `NetworkEnvironment`, `NetworkConnection` and `NetworkListener` run on it unchanged:
/// establishment, the drivers, the owners, the public calls, everything but the kernel.
final class MemoryNetwork: DatagramSocketFactory, Sendable {
    let loop: EventLoop
    let delay: Duration
    private let lastPort: UInt16
    private let state: Locked<State>

    private struct State {
        var bound: [SocketAddress: MemorySocketBox] = [:]
        var nextPort: UInt16
        /// Datagrams on their way, in the order they were sent (which, with one delay for all,
        /// is the order they are due), from `firstInFlight` on.
        var inFlight: [InFlight] = []
        var firstInFlight = 0
    }

    private struct InFlight {
        let due: MonotonicInstant
        let bytes: [UInt8]
        let metadata: DatagramMetadata
    }

    /// A network whose sockets bound to port 0 get ports from `firstPort` up to `lastPort`
    /// (then binding fails with EADDRNOTAVAIL).
    init(loop: EventLoop, delay: Duration = .milliseconds(5), firstPort: UInt16 = 40000, lastPort: UInt16 = .max) {
        self.loop = loop
        self.delay = delay
        self.lastPort = lastPort
        state = Locked(State(nextPort: firstPort))
    }

    /// The environment that puts connections and listeners on this network and its loop.
    var environment: NetworkEnvironment { NetworkEnvironment(loop: loop, sockets: self) }

    func bind(
        _ address: SocketAddress, batching: BatchingOptions, receiveSlots: Int, sendBatches: Int, reusePort: Bool
    ) throws -> any DatagramSocket {
        try state.withLock { state in
            var local = address
            if local.port == 0 {
                guard state.nextPort <= lastPort else { throw DatapathError.system("bind(\(local))", EADDRNOTAVAIL) }
                local = local.withPort(state.nextPort)
                state.nextPort += 1
            }
            guard state.bound[local] == nil else { throw DatapathError.system("bind(\(local))", EADDRINUSE) }
            let socket = MemorySocket(network: self, localAddress: local, sendBatches: sendBatches)
            state.bound[local] = MemorySocketBox(socket)
            return socket
        }
    }

    func localAddress(toward remote: SocketAddress) throws -> SocketAddress {
        SocketAddress(ip: remote.isIPv6 ? "::1" : "127.0.0.1", port: 0)!
    }

    func unbind(_ address: SocketAddress) {
        _ = state.withLock { $0.bound.removeValue(forKey: address) }
    }

    /// The socket a datagram to `address` reaches: bound to it, or to the wildcard on its port
    /// (for IPv4, `::` too: a dual-stack socket, which reports IPv4 peers as IPv4).
    private func socket(at address: SocketAddress) -> MemorySocket? {
        state.withLock { state in
            state.bound[address]?.socket
                ?? state.bound[SocketAddress(ip: address.isIPv6 ? "::" : "0.0.0.0", port: address.port)!]?.socket
                ?? (address.isIPv6 ? nil : state.bound[SocketAddress(ip: "::", port: address.port)!]?.socket)
        }
    }

    /// Carries one datagram; called on the loop by a sending socket.
    func send(_ bytes: [UInt8], from source: SocketAddress, to destination: SocketAddress, ecn: ECN, context: LoopContext) {
        let due = context.now + delay
        let metadata = DatagramMetadata(remote: source, local: destination, ecn: ecn)
        state.withLock { $0.inFlight.append(InFlight(due: due, bytes: bytes, metadata: metadata)) }
        context.schedule(at: due) { [self] context in deliverDue(context) }
    }

    /// Delivers the datagrams due by now in the order they were sent: the loop runs timers due
    /// at the same instant in no set order, and datagrams on a link of one delay do not
    /// overtake each other.
    private func deliverDue(_ context: LoopContext) {
        while let datagram = nextDue(by: context.now) {
            socket(at: datagram.metadata.local)?.arrive(datagram.bytes, metadata: datagram.metadata, context)
        }
    }

    private func nextDue(by now: MonotonicInstant) -> InFlight? {
        state.withLock { state in
            guard state.firstInFlight < state.inFlight.count, state.inFlight[state.firstInFlight].due <= now else { return nil }
            let datagram = state.inFlight[state.firstInFlight]
            state.firstInFlight += 1
            if state.firstInFlight == state.inFlight.count || state.firstInFlight >= 4096 {
                state.inFlight.removeFirst(state.firstInFlight)
                state.firstInFlight = 0
            }
            return datagram
        }
    }
}

/// Lets the network's table hold sockets that are confined to the loop.
private struct MemorySocketBox: @unchecked Sendable {
    let socket: MemorySocket
    init(_ socket: MemorySocket) { self.socket = socket }
}

/// A socket of a `MemoryNetwork`: batches go out as datagrams through the network, arrivals
/// wait in a queue and wake the registered handler. Used on its loop only.
final class MemorySocket: DatagramSocket {
    let localAddress: SocketAddress
    private(set) var counters = SocketCounters()
    private unowned let network: MemoryNetwork
    private let sendBatches: Int
    private let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
    private var pending: [(metadata: DatagramMetadata, segmentSize: Int, bytes: [UInt8])] = []
    private var arrived: [([UInt8], DatagramMetadata)] = []
    private weak var handler: LoopHandler?
    private var context: LoopContext?
    private var isOpen = true

    init(network: MemoryNetwork, localAddress: SocketAddress, sendBatches: Int) {
        self.network = network
        self.localAddress = localAddress
        self.sendBatches = max(1, sendBatches)
    }

    deinit { slot.deallocate() }

    var canEnqueue: Bool { pending.count < sendBatches }
    var freeSlot: UnsafeMutableRawBufferPointer? { canEnqueue ? slot : nil }

    func commitSlot(_ metadata: DatagramMetadata, segmentSize: Int, length: Int) {
        pending.append((metadata, max(segmentSize, 1), Array(UnsafeRawBufferPointer(rebasing: slot[0..<length]))))
    }

    func enqueue(_ metadata: DatagramMetadata, segmentSize: Int, bytes: UnsafeRawBufferPointer) {
        pending.append((metadata, max(segmentSize, 1), Array(bytes)))
    }

    @discardableResult func flush() -> Bool {
        guard let context, isOpen else {
            pending.removeAll()
            return true
        }
        if !pending.isEmpty { counters.sendmmsgCalls += 1 }
        for batch in pending {
            // A wildcard-bound socket answers from the address it was reached on.
            let source = localAddress.isWildcard ? batch.metadata.local.withPort(localAddress.port) : localAddress
            batch.bytes.withUnsafeBytes { bytes in
                UDPSegmentation.forEachSegment(of: bytes, segmentSize: batch.segmentSize) { datagram in
                    counters.datagramsSent += 1
                    counters.bytesSent += UInt64(datagram.count)
                    network.send(Array(datagram), from: source, to: batch.metadata.remote, ecn: batch.metadata.ecn, context: context)
                }
            }
        }
        pending.removeAll(keepingCapacity: true)
        return true
    }

    @discardableResult func receive(_ body: (UnsafeRawBufferPointer, DatagramMetadata) -> Void) -> Bool {
        guard isOpen, !arrived.isEmpty else { return false }
        counters.recvmmsgCalls += 1
        let batch = arrived
        arrived.removeAll(keepingCapacity: true)
        for (bytes, metadata) in batch {
            counters.datagramsReceived += 1
            counters.bytesReceived += UInt64(bytes.count)
            bytes.withUnsafeBytes { body($0, metadata) }
        }
        return true
    }

    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        self.handler = handler
        self.context = context
        return context.registerTimer(handler)
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        network.unbind(localAddress)
    }

    /// A datagram from the network: queued, and the handler told.
    func arrive(_ bytes: [UInt8], metadata: DatagramMetadata, _ context: LoopContext) {
        guard isOpen else { return }
        arrived.append((bytes, metadata))
        handler?.readable(context)
    }
}
