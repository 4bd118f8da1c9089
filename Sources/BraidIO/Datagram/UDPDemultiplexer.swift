import BraidCore
import DequeModule
import Logging

/// One loop's listening UDP socket and the channels of the peers it has heard from, by remote
/// address. It is the transport of each of them: their sends share its socket.
///
/// A peer's first datagram costs its sender nothing, and its source address may be forged, so
/// with `peersNeedProof` a new peer starts unproven: it is proven once it sends again after its
/// channel sent it a datagram (it receives what is sent to it, as far as UDP can tell). When the
/// listener is full, `displaceUnprovenPeer` closes the oldest unproven peer to make room for a
/// new one, giving a peer heard from again since it was last considered one more turn (a
/// sender that keeps talking to a listener that never answers is not displaced by a flood of
/// one-datagram peers). Proven peers are never displaced: they end at the idle timeout.
package final class UDPDemultiplexer: DatagramChannelTransport, LoopHandler {
    package let socket: any DatagramSocket
    private let idleTimeout: Duration
    /// Makes the channel of a new peer from its first datagram (nil: none, the datagram is
    /// dropped, or answered with `reply` by a stack that proves addresses first).
    private let accept: (UnsafeRawBufferPointer, DatagramMetadata, UDPDemultiplexer, LoopContext) -> DatagramChannel?
    private(set) var channels: [SocketAddress: DatagramChannel] = [:]
    /// Gives freed heap back once the peers fall far below their peak (after a flood).
    var heapTrim = HeapTrimPolicy()
    /// Channels waiting for the socket to drain.
    private var waitingForWritable: [DatagramChannel] = []
    private var token: UInt64?
    private var idleTimer: UInt64?
    private(set) var closed = false
    /// Datagrams of new peers dropped because the listener was full (`newConnectionLimit`, or
    /// its buffer limit), or that a stack turned away (DTLS: no valid cookie).
    package private(set) var refusedDatagrams: UInt64 = 0
    /// Unproven peers closed to make room for new ones.
    package private(set) var displacedPeers: UInt64 = 0
    /// Whether new peers start unproven (plain UDP); false when the stack proves addresses
    /// before a peer gets a channel (DTLS's cookie exchange).
    private let peersNeedProof: Bool
    /// The unproven peers, by their channel: whether each was heard from again since it entered
    /// `probationOrder` (its second chance).
    private var probation: [ObjectIdentifier: Bool] = [:]
    /// The unproven peers, oldest first; entries of peers since proven or ended are skipped
    /// when reached (and dropped when they outnumber the live ones).
    private var probationOrder = Deque<DatagramChannel>()
    /// The peer of the last datagram of the current read and its channel: a read's datagrams
    /// mostly come from one peer (GRO merges only one sender's), so most skip hashing the
    /// address. Forgotten at each read, so each read's first datagram from a peer still goes
    /// through the table and counts as hearing from it again (`heardAgain`, which proves it).
    /// Fields rather than a variable the read's closure captures, and unchecked: touched only
    /// on the loop, by `readable` and `release`, neither of which runs inside the other's access.
    @exclusivity(unchecked) private var lastRemote = SocketAddress.unspecified
    @exclusivity(unchecked) private var lastChannel: DatagramChannel?

    init(
        socket: any DatagramSocket, idleTimeout: Duration, peersNeedProof: Bool = false,
        accept: @escaping (UnsafeRawBufferPointer, DatagramMetadata, UDPDemultiplexer, LoopContext) -> DatagramChannel?
    ) {
        self.socket = socket
        self.idleTimeout = idleTimeout
        self.peersNeedProof = peersNeedProof
        self.accept = accept
    }

    /// Peers not yet proven (see the type's comment).
    package var unprovenPeerCount: Int { probation.count }

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
        // Every channel's datagrams of this event's reads go to its inbox together, once the
        // reads are done: one hand-off (and at most one wake of its reader) per event, not per read.
        var arrivedAt: [DatagramChannel] = []
        defer { for channel in arrivedAt { channel.deliverArrivals() } }
        for _ in 0..<4 {
            var any = false
            lastChannel = nil
            let received = socket.receive { bytes, metadata in
                any = true
                if let channel = lastChannel, !channel.hasEnded, lastRemote == metadata.remote {
                    if channel.arrived(bytes, metadata: metadata, context: context) { arrivedAt.append(channel) }
                    return
                }
                let channel: DatagramChannel
                if let known = channels[metadata.remote] {
                    channel = known
                    if !probation.isEmpty { heardAgain(known) }
                } else {
                    guard !closed, let made = accept(bytes, metadata, self, context) else {
                        refusedDatagrams += 1
                        return
                    }
                    channels[metadata.remote] = made
                    heapTrim.connectionsChanged(to: channels.count)
                    if peersNeedProof { startProbation(made) }
                    made.attach(
                        transport: self, remote: metadata.remote, local: metadata.local,
                        unixPath: (socket as? UnixDatagramSocket)?.path.path, context: context)
                    guard made.finalError == nil else { return }
                    channel = made
                }
                lastRemote = metadata.remote
                lastChannel = channel
                if channel.arrived(bytes, metadata: metadata, context: context) { arrivedAt.append(channel) }
            }
            guard received, any else { return }
        }
    }

    /// A new peer's channel starts unproven.
    private func startProbation(_ channel: DatagramChannel) {
        probation[ObjectIdentifier(channel)] = false
        probationOrder.append(channel)
        // Entries of peers since proven or ended stay in the order until reached: drop them
        // when they outnumber the live ones, so the order stays within twice the table.
        if probationOrder.count > 2 * probation.count + 64 {
            probationOrder.removeAll { probation[ObjectIdentifier($0)] == nil }
        }
    }

    /// A datagram from a known peer: proven if its channel has sent it something, else marked
    /// as heard from again.
    private func heardAgain(_ channel: DatagramChannel) {
        let id = ObjectIdentifier(channel)
        guard probation[id] != nil else { return }
        probation[id] = channel.hasSent ? nil : true
    }

    /// The listener is full: closes the oldest unproven peer on this loop (`displaced`), so a new
    /// peer can take its place. A peer heard from again since it was last considered goes to the
    /// back once instead. False when this loop has no unproven peer to close.
    package func displaceUnprovenPeer(_ context: LoopContext) -> Bool {
        guard !closed else { return false }
        // Each live entry is passed over at most once (its second chance), so this ends.
        var turns = probationOrder.count
        while turns > 0, let channel = probationOrder.popFirst() {
            turns -= 1
            let id = ObjectIdentifier(channel)
            guard let heard = probation[id] else { continue }
            if channel.finalError != nil {
                probation[id] = nil
                continue
            }
            if heard {
                probation[id] = false
                probationOrder.append(channel)
                continue
            }
            probation[id] = nil
            displacedPeers += 1
            channel.fail(DatagramChannelError.displaced, context: context)
            return true
        }
        return false
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
        if lastChannel === channel { lastChannel = nil }
        if let remote = channel.remoteAddress, channels[remote] === channel {
            channels[remote] = nil
            heapTrim.connectionsChanged(to: channels.count)
        }
        if !probation.isEmpty { probation[ObjectIdentifier(channel)] = nil }
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
        lastChannel = nil
        probation.removeAll()
        probationOrder.removeAll()
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
