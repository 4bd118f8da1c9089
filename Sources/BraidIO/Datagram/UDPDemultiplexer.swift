import BraidCore
import Logging

/// One loop's listening UDP socket and the channels of the peers it has heard from, by remote
/// address. It is the transport of each of them: their sends share its socket.
package final class UDPDemultiplexer: DatagramChannelTransport, LoopHandler {
    package let socket: any DatagramSocket
    private let idleTimeout: Duration
    /// Makes the channel of a new peer from its first datagram (nil: none, the datagram is
    /// dropped, or answered with `reply` by a stack that proves addresses first).
    private let accept: (UnsafeRawBufferPointer, DatagramMetadata, UDPDemultiplexer, LoopContext) -> DatagramChannel?
    private var channels: [SocketAddress: DatagramChannel] = [:]
    /// Channels waiting for the socket to drain.
    private var waitingForWritable: [DatagramChannel] = []
    private var token: UInt64?
    private var idleTimer: UInt64?
    private var closed = false
    /// Datagrams dropped because the listener was full (`newConnectionLimit`).
    package private(set) var refusedDatagrams: UInt64 = 0

    init(
        socket: any DatagramSocket, idleTimeout: Duration,
        accept: @escaping (UnsafeRawBufferPointer, DatagramMetadata, UDPDemultiplexer, LoopContext) -> DatagramChannel?
    ) {
        self.socket = socket
        self.idleTimeout = idleTimeout
        self.accept = accept
    }

    /// Peers with a channel now.
    package var peerCount: Int { channels.count }

    func start(_ context: LoopContext) throws {
        token = try socket.register(self, in: context)
        let timer = context.registerTimer(IdleSweep(self))
        idleTimer = timer
        context.setTimer(timer, at: context.now + sweepInterval)
    }

    private var sweepInterval: Duration { max(idleTimeout / 4, .milliseconds(10)) }

    package func readable(_ context: LoopContext) {
        for _ in 0..<4 {
            var any = false
            var arrivedAt: [DatagramChannel] = []
            // The peer of the previous datagram: a read's datagrams mostly come from one peer
            // (GRO merges only one sender's), so most skip hashing the address.
            var last: (remote: SocketAddress, channel: DatagramChannel)?
            let received = socket.receive { bytes, metadata in
                any = true
                let channel: DatagramChannel
                if let last, last.remote == metadata.remote, last.channel.finalError == nil {
                    channel = last.channel
                } else if let known = channels[metadata.remote] {
                    channel = known
                } else {
                    guard !closed, let made = accept(bytes, metadata, self, context) else {
                        refusedDatagrams += 1
                        return
                    }
                    channels[metadata.remote] = made
                    made.attach(
                        transport: self, remote: metadata.remote, local: metadata.local,
                        unixPath: (socket as? UnixDatagramSocket)?.path.path, context: context)
                    guard made.finalError == nil else { return }
                    channel = made
                }
                last = (metadata.remote, channel)
                if channel.arrived(bytes, metadata: metadata, context: context) { arrivedAt.append(channel) }
            }
            for channel in arrivedAt { channel.deliverArrivals() }
            guard received, any else { return }
        }
    }

    /// Sends `bytes` to the sender of a datagram (`metadata`) that has no channel, such as a
    /// DTLS HelloVerifyRequest; dropped when the socket has no room, as UDP may drop it.
    package func reply(_ bytes: [UInt8], to metadata: DatagramMetadata) {
        guard !closed, let slot = socket.freeSlot, bytes.count <= slot.count else { return }
        bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: slot[0..<$0.count]).copyMemory(from: $0) }
        socket.commitSlot(DatagramMetadata(remote: metadata.remote, local: metadata.local), segmentSize: bytes.count, length: bytes.count)
        socket.flush()
    }

    package func waitForWritable(_ channel: DatagramChannel, context: LoopContext) {
        if !waitingForWritable.contains(where: { $0 === channel }) { waitingForWritable.append(channel) }
        if let token { context.setWantsWritable(token, true) }
    }

    package func release(_ channel: DatagramChannel, context: LoopContext) {
        if let remote = channel.remoteAddress, channels[remote] === channel { channels[remote] = nil }
        waitingForWritable.removeAll { $0 === channel }
    }

    package func writable(_ context: LoopContext) {
        if let token { context.setWantsWritable(token, false) }
        let waiting = waitingForWritable
        waitingForWritable.removeAll()
        for channel in waiting { channel.writable(context) }
    }

    package func timerFired(_ context: LoopContext) {}

    /// Ends the channels that have been idle for `idleTimeout`.
    fileprivate func sweep(_ context: LoopContext) {
        guard !closed else { return }
        let now = context.now
        for channel in Array(channels.values) {
            if let last = channel.lastActivity, now - last >= idleTimeout {
                channel.fail(DatagramChannelError.idleTimeout, context: context)
            }
        }
        if let idleTimer { context.setTimer(idleTimer, at: now + sweepInterval) }
    }

    package func close(_ context: LoopContext) {
        guard !closed else { return }
        closed = true
        for channel in Array(channels.values) { channel.cancel(context: context) }
        channels.removeAll()
        if let token { context.deregister(token) }
        if let idleTimer { context.deregister(idleTimer) }
        token = nil
        idleTimer = nil
        socket.close()
    }
}

/// The demultiplexer's idle timer (its socket registration has a timer of its own, unused).
private final class IdleSweep: LoopHandler {
    weak var demultiplexer: UDPDemultiplexer?
    init(_ demultiplexer: UDPDemultiplexer) { self.demultiplexer = demultiplexer }
    func readable(_ context: LoopContext) {}
    func writable(_ context: LoopContext) {}
    func timerFired(_ context: LoopContext) { demultiplexer?.sweep(context) }
    func close(_ context: LoopContext) {}
}
