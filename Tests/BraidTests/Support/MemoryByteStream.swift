import BraidCore
import BraidIO
import CBraidUDP
import Foundation

/// In-memory byte streams for the sockets of one virtual loop, behind the same
/// `ByteStreamSocketFactory` the real `TCPSockets` serve: a connect reaches the listener on its
/// address after `delay` (or is refused with ECONNREFUSED when nobody listens there), and each
/// direction of a connection holds at most `capacity` unread bytes, so a writer meets
/// backpressure (short writes, then 0) as with a full TCP window. Readiness reaches the
/// handlers through the loop, level-triggered as epoll reports it.
///
/// Simplifications: bytes arrive at once (no latency after establishment); writing to a peer
/// that closed fails at once with EPIPE (TCP's first write would still succeed).
final class MemoryStreamNetwork: ByteStreamSocketFactory, Sendable {
    let loop: EventLoop
    let capacity: Int
    let delay: Duration
    private let state = Locked(State())

    private struct State {
        var listeners: [SocketAddress: MemoryStreamBox<MemoryStreamListener>] = [:]
        var nextPort: UInt16 = 50000
        /// The sockets `connect` made, in order.
        var connected: [MemoryStreamBox<MemoryStreamSocket>] = []
    }

    /// The system-call counters of the sockets `connect` made, in order. Call it on the loop.
    func connectedSocketCounters() -> [SocketCounters] {
        state.withLock { $0.connected.map(\.value.counters) }
    }

    init(loop: EventLoop, capacity: Int = 64 * 1024, delay: Duration = .milliseconds(1)) {
        self.loop = loop
        self.capacity = capacity
        self.delay = delay
    }

    /// Two connected sockets (not yet registered), with `capacity` bytes each way.
    static func pair(capacity: Int) -> (MemoryStreamSocket, MemoryStreamSocket) {
        let a = MemoryStreamSocket(local: SocketAddress(ip: "10.0.0.1", port: 1000)!, remote: SocketAddress(ip: "10.0.0.2", port: 2000)!, capacity: capacity)
        let b = MemoryStreamSocket(local: a.remoteAddress, remote: a.localAddress, capacity: capacity)
        a.link(b)
        return (a, b)
    }

    func connect(to remote: SocketAddress, from local: SocketAddress?, options: TCPOptions) throws -> any ByteStreamSocket {
        let port = state.withLock { state in
            defer { state.nextPort += 1 }
            return state.nextPort
        }
        let localAddress = (local ?? SocketAddress(ip: remote.isIPv6 ? "::1" : "127.0.0.1", port: 0)!).withPort(port)
        let socket = MemoryStreamSocket(local: localAddress, remote: remote, capacity: capacity)
        state.withLock { $0.connected.append(MemoryStreamBox(socket)) }
        socket.establish = { [self] socket, context in
            context.schedule(at: context.now + delay) { [self] _ in
                // As the kernel does: the address itself, else the wildcard of its family,
                // else (IPv4) a dual-stack `::` on that port.
                let listener = state.withLock { state in
                    state.listeners[remote]?.value
                        ?? state.listeners[SocketAddress(ip: remote.isIPv6 ? "::" : "0.0.0.0", port: remote.port)!]?.value
                        ?? (remote.isIPv6 ? nil : state.listeners[SocketAddress(ip: "::", port: remote.port)!]?.value)
                }
                guard let listener, listener.isOpen else {
                    socket.refuse()
                    return
                }
                let server = MemoryStreamSocket(local: remote, remote: localAddress, capacity: capacity)
                socket.link(server)
                listener.enqueue(server)
            }
        }
        return socket
    }

    func listen(on address: SocketAddress, options: TCPOptions, reusePort: Bool, backlog: Int) throws -> any ByteStreamListener {
        try state.withLock { state in
            var local = address
            if local.port == 0 {
                local = local.withPort(state.nextPort)
                state.nextPort += 1
            }
            guard state.listeners[local] == nil else { throw DatapathError.system("bind(\(local))", EADDRINUSE) }
            let listener = MemoryStreamListener(localAddress: local) { [weak self] in
                _ = self?.state.withLock { $0.listeners.removeValue(forKey: local) }
            }
            state.listeners[local] = MemoryStreamBox(listener)
            return listener
        }
    }
}

/// Lets the network's table hold loop-confined objects.
private struct MemoryStreamBox<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Delivers level-triggered readiness for an in-memory socket or listener: after any change,
/// once per loop pass, again and again while it holds and the interest is on.
private final class ReadinessPump {
    weak var handler: LoopHandler?
    weak var context: LoopContext?
    var token: UInt64 = 0
    private var scheduled = false

    var wantsReadable: Bool { context?.wantsReadable(token) ?? false }
    var wantsWritable: Bool { context?.wantsWritable(token) ?? false }

    /// Reports readiness in a coming pass (`ready` says what holds then).
    func poke(_ ready: @escaping () -> (readable: Bool, writable: Bool)) {
        guard !scheduled, let context else { return }
        scheduled = true
        context.schedule(at: context.now) { [weak self] context in
            guard let self, let handler else { return }
            scheduled = false
            let now = ready()
            var delivered = false
            if now.writable && wantsWritable {
                handler.writable(context)
                delivered = true
            }
            let later = ready()
            if later.readable && wantsReadable {
                handler.readable(context)
                delivered = true
            }
            // Level-triggered: still ready, reported again next pass.
            let after = ready()
            if delivered && ((after.readable && wantsReadable) || (after.writable && wantsWritable)) { poke(ready) }
        }
    }
}

/// One end of an in-memory byte stream. Used on its loop only.
final class MemoryStreamSocket: ByteStreamSocket {
    let localAddress: SocketAddress
    let remoteAddress: SocketAddress
    let isMultipath = false
    let connectDeferredUntilWrite = false
    private(set) var counters = SocketCounters()
    /// The most unread bytes this end ever held (never above `capacity`).
    private(set) var peakBuffered = 0
    let capacity: Int
    /// Set by the network: starts establishment once the socket is on a loop.
    var establish: ((MemoryStreamSocket, LoopContext) -> Void)?

    private weak var peer: MemoryStreamSocket?
    private var inbound: [UInt8] = []
    private var inboundStart = 0
    private var peerFinished = false
    private var reset = false
    private var connectError: Int32?
    private var connected = false
    private var writeShut = false
    private var isOpen = true
    private let pump = ReadinessPump()
    private let vector = UnsafeMutablePointer<iovec>.allocate(capacity: TCPSocket.maxWriteRegions)

    init(local: SocketAddress, remote: SocketAddress, capacity: Int) {
        localAddress = local
        remoteAddress = remote
        self.capacity = capacity
    }

    deinit { vector.deallocate() }

    var buffered: Int { inbound.count - inboundStart }
    private var readyNow: (readable: Bool, writable: Bool) {
        let writable = connectError != nil || reset || (connected && (peer.map { $0.buffered < $0.capacity } ?? true))
        return (buffered > 0 || peerFinished || reset, writable)
    }
    private func poke() { pump.poke { [weak self] in self?.readyNow ?? (false, false) } }

    func link(_ other: MemoryStreamSocket) {
        peer = other
        other.peer = self
        connected = true
        other.connected = true
        poke()
        other.poke()
    }

    func refuse() {
        connectError = ECONNREFUSED
        poke()
    }

    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        if pump.context === context, pump.token != 0 {
            // Registering again hands the socket over (a connect attempt's socket going to the
            // connection), as TCPSocket does.
            pump.handler = handler
            context.replaceHandler(pump.token, with: handler)
            return pump.token
        }
        pump.handler = handler
        pump.context = context
        pump.token = context.registerTimer(handler)
        establish?(self, context)
        establish = nil
        poke()
        return pump.token
    }

    func setWantsReadable(_ wants: Bool) {
        pump.context?.setWantsReadable(pump.token, wants)
        poke()
    }

    func setWantsWritable(_ wants: Bool) {
        pump.context?.setWantsWritable(pump.token, wants)
        poke()
    }

    func finishConnect() throws {
        counters.controlCalls += 1
        if let connectError { throw DatapathError.system("connect(\(remoteAddress))", connectError) }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> StreamReadResult {
        precondition(buffer.count > 0)
        guard isOpen else { throw DatapathError.system("recv", EBADF) }
        counters.recvCalls += 1
        if reset { throw DatapathError.system("recv", ECONNRESET) }
        guard buffered > 0 else {
            if peerFinished {
                counters.readEndOfStream += 1
                return .endOfStream
            }
            counters.readWouldBlock += 1
            return .wouldBlock
        }
        let count = min(buffer.count, buffered)
        inbound.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[inboundStart..<inboundStart + count])) }
        inboundStart += count
        if inboundStart == inbound.count {
            inbound.removeAll(keepingCapacity: true)
            inboundStart = 0
        }
        counters.bytesReceived += UInt64(count)
        // Room again: the writer hears it.
        peer?.poke()
        return .bytes(count)
    }

    func write(_ fill: (inout WriteRegions) throws -> Void) throws -> Int {
        var regions = WriteRegions(storage: vector, capacity: TCPSocket.maxWriteRegions)
        try fill(&regions)
        guard regions.byteCount > 0 else { return 0 }
        guard isOpen, !writeShut else { throw DatapathError.system("sendmsg", EPIPE) }
        counters.sendmsgCalls += 1
        guard !reset, let peer, peer.isOpen else { throw DatapathError.system("sendmsg", EPIPE) }
        var room = peer.capacity - peer.buffered
        var written = 0
        for region in regions.iovecs where room > 0 {
            let count = min(room, region.iov_len)
            peer.inbound.append(contentsOf: UnsafeRawBufferPointer(start: region.iov_base, count: count))
            room -= count
            written += count
        }
        peer.peakBuffered = max(peer.peakBuffered, peer.buffered)
        counters.bytesSent += UInt64(written)
        counters.regionsWritten += UInt64(regions.count)
        if written < regions.byteCount { counters.partialWrites += 1 }
        if written == 0 { counters.writeWouldBlock += 1 }
        if written > 0 { peer.poke() }
        return written
    }

    func shutdownWrite() throws {
        guard isOpen else { throw DatapathError.system("shutdown", EBADF) }
        counters.controlCalls += 1
        writeShut = true
        peer?.peerFinished = true
        peer?.poke()
    }

    func close() {
        guard isOpen else { return }
        // Unread bytes make TCP reset rather than finish.
        if buffered > 0 { return abort() }
        isOpen = false
        counters.controlCalls += 1
        peer?.peerFinished = true
        peer?.poke()
        leaveLoop()
    }

    func abort() {
        guard isOpen else { return }
        isOpen = false
        counters.controlCalls += 1
        peer?.reset = true
        peer?.poke()
        leaveLoop()
    }

    private func leaveLoop() {
        if let context = pump.context { context.deregister(pump.token) }
        pump.context = nil
    }
}

/// A listener of a `MemoryStreamNetwork`: connections wait in a queue until accepted.
final class MemoryStreamListener: ByteStreamListener {
    let localAddress: SocketAddress
    private(set) var counters = SocketCounters()
    private(set) var isOpen = true
    private var waiting: [MemoryStreamSocket] = []
    private let pump = ReadinessPump()
    private let unbind: () -> Void

    init(localAddress: SocketAddress, unbind: @escaping () -> Void) {
        self.localAddress = localAddress
        self.unbind = unbind
    }

    func enqueue(_ socket: MemoryStreamSocket) {
        waiting.append(socket)
        poke()
    }

    private func poke() { pump.poke { [weak self] in (!(self?.waiting.isEmpty ?? true), false) } }

    func acceptSocket() throws -> (any ByteStreamSocket)? {
        counters.acceptCalls += 1
        guard !waiting.isEmpty else {
            counters.acceptWouldBlock += 1
            return nil
        }
        return waiting.removeFirst()
    }

    func register(_ handler: LoopHandler, in context: LoopContext) throws -> UInt64 {
        pump.handler = handler
        pump.context = context
        pump.token = context.registerTimer(handler)
        poke()
        return pump.token
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        unbind()
        for socket in waiting { socket.abort() }
        waiting.removeAll()
        if let context = pump.context { context.deregister(pump.token) }
        pump.context = nil
    }
}
