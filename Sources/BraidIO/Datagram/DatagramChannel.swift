import BraidCore
import DequeModule
import Foundation
import Logging

/// One received UDP datagram, whole, with where it came from, where it arrived and its ECN mark.
///
/// A socket read's datagrams lie in one shared block (`ReceivedDatagramBatch`); each is made a
/// `Data` only when its reader asks for `content`, on the reader's thread: the `Data`'s storage
/// is then allocated and freed by the same thread, where the allocator serves it from its
/// per-thread cache, and the loop's thread, which must keep up with the socket, makes none.
package struct ReceivedDatagram: Sendable {
    /// The block holding the bytes, and where (nil: an empty datagram). Nothing else: a copy of
    /// a datagram, as the queues make, is one reference count (a `Data` field beside it, empty
    /// but for empty datagrams, cost an outlined copy and destroy of its enum each time).
    private let block: ReceivedBytes?
    private let offset: Int
    private let count: Int
    package var metadata: DatagramMetadata

    /// An empty datagram.
    init(emptyWith metadata: DatagramMetadata) {
        block = nil
        offset = 0
        count = 0
        self.metadata = metadata
    }

    /// A datagram of `content`'s bytes, copied into a block of its own.
    package init(content: Data, metadata: DatagramMetadata) {
        guard !content.isEmpty else {
            self.init(emptyWith: metadata)
            return
        }
        let block = ReceivedBytes(capacity: content.count)
        content.withUnsafeBytes { bytes in
            if let source = bytes.baseAddress { block.base.copyMemory(from: source, byteCount: bytes.count) }
        }
        self.init(block: block, offset: 0, count: content.count, metadata: metadata)
    }

    init(block: ReceivedBytes, offset: Int, count: Int, metadata: DatagramMetadata) {
        self.block = block
        self.offset = offset
        self.count = count
        self.metadata = metadata
    }

    /// The datagram's size in bytes, without making its `Data` (a listener's buffer limit
    /// measures every datagram the loop hands over).
    package var byteCount: Int { count }

    /// The datagram's bytes, from index 0. Made from the block on each call, so a datagram is
    /// read once where it is handed out (two `Data` made from one datagram would share its bytes
    /// without knowing it, and an in-place change of one would show in the other).
    package var content: Data {
        guard let block else { return Data() }
        // The deallocator's reference is what keeps the block: it goes with the last `Data`.
        return Data(bytesNoCopy: block.base + offset, count: count, deallocator: .custom { _, _ in block.keepAlive() })
    }
}

/// What a datagram channel writes through: its own socket (a client connection), or the
/// listener's socket it shares with the loop's other peers (an inbound connection).
package protocol DatagramChannelTransport: AnyObject {
    var socket: any DatagramSocket { get }
    /// The socket is full: call `channel.writable(_:)` once it drains.
    func waitForWritable(_ channel: DatagramChannel, context: LoopContext)
    /// The channel ended: a client's socket closes; a listener forgets the peer.
    func release(_ channel: DatagramChannel, context: LoopContext)
}

/// One UDP connection's owner on its loop: its transport (socket), its peer, and the queues
/// the application's tasks use directly: a `DatagramOutbox` for sends, a `MessageInbox` of
/// `ReceivedDatagram`s for receives.
///
/// Sending: senders queue without a loop hop; the first send of a burst posts one drain pass
/// (`sendQueued`), which takes everything queued and lays it out in the socket's send slots:
/// consecutive datagrams of one size (at most `coalescedSegmentLimit` bytes each; the last of a
/// run may be shorter) share one GSO batch, every batch goes out in one `sendmmsg`. When the
/// socket is full, what is left waits here for it to drain; the outbox's bound holds senders back.
///
/// Receiving: every datagram from the peer is delivered whole. The socket's receive slots hold
/// 64 KiB, more than any UDP payload, so the kernel never truncates one; a truncated message
/// (MSG_TRUNC) would be dropped and counted (`SocketCounters.truncatedMessages`), never passed on
/// cut short. Unread datagrams beyond `inboxBacklog`, or beyond `inboxByteLimit` bytes, are
/// dropped, oldest first.
package final class DatagramChannel: ConnectionChannel {
    /// UDP's largest payload over IPv4 (65,535 less the IPv4 and UDP headers) and IPv6.
    package static let maximumPayloadIPv4 = 65_507
    package static let maximumPayloadIPv6 = 65_527
    /// Datagrams queued before senders wait.
    package static let queueLimit = 256
    /// Unread datagrams kept for the application.
    package static let inboxBacklog = 4096
    /// Unread bytes kept for the application (payloads and entries, as a listener's buffer
    /// limit counts them): without it, `inboxBacklog` datagrams of 64 KiB would be 256 MiB for
    /// one peer between two of a listener's buffer sweeps. Above the backlog's worth of
    /// 1,500-byte datagrams, so it binds only when datagrams are large.
    package static let inboxByteLimit = 8 << 20
    /// Datagrams up to this size are coalesced into GSO batches (a 1,500-byte Ethernet frame
    /// less IPv6 and UDP headers): the kernel refuses a GSO segment larger than the path's MTU.
    package static let coalescedSegmentLimit = 1452

    package let loop: EventLoop
    package weak var delegate: ConnectionChannelDelegate?
    /// Measured: a listener's buffer limit counts each unread datagram's payload and entry.
    package let inbox = MessageInbox<ReceivedDatagram>(backlog: DatagramChannel.inboxBacklog, byteLimit: DatagramChannel.inboxByteLimit) {
        $0.byteCount + MemoryLayout<ReceivedDatagram>.stride
    }
    package let outbox = DatagramOutbox(limit: DatagramChannel.queueLimit)
    /// Turns datapath and internal errors into the caller's error type.
    let describe: (any Error) -> any Error

    private var transport: (any DatagramChannelTransport)?
    private var standIn: ChannelStandIn?
    package private(set) var remoteAddress: SocketAddress?
    package private(set) var localAddress: SocketAddress?
    // The fields each datagram sent or received reads or writes are `@exclusivity(unchecked)`:
    // the channel is confined to its loop's thread and no access to them spans another (none
    // is passed `inout` to a call that could reach the channel), so the run-time check each
    // access made (a call into the runtime's access set) guards nothing.
    @exclusivity(unchecked) package private(set) var finalError: (any Error)?
    /// `finalError != nil`, as a flag a listener reads per datagram (testing the existential
    /// copied it, retaining its box).
    @exclusivity(unchecked) package private(set) var hasEnded = false
    package private(set) var isReady = false
    /// The last send or receive, for a listener's idle timeout.
    @exclusivity(unchecked) package private(set) var lastActivity: MonotonicInstant?
    /// The channel has sent its peer a datagram: a listener takes a peer that sends again after
    /// that as one that receives what is sent to it (`UDPDemultiplexer`'s proven peers).
    package private(set) var hasSent = false
    /// Taken from the outbox, waiting for room in the socket, each with the ECN mark it
    /// leaves with (the outbox's are unmarked; a marked send comes through the loop).
    @exclusivity(unchecked) private var unsent = Deque<(content: Data, ecn: ECN)>()
    /// The socket is full: nothing more is taken from the outbox until it drains, so the
    /// outbox's bound holds senders back and `unsent` stays bounded.
    private var awaitingWritable = false
    /// Sends that reached the loop before the channel was ready (or were too large for the
    /// outbox's fast path), with their callers.
    private var waitingSends: [(Data, ECN, Completion<Void>)] = []
    /// What runs between the socket and the application (DTLS), set before the channel has a
    /// socket; nil: datagrams pass as they are.
    @exclusivity(unchecked) package var layer: (any DatagramLayer)?
    /// The layer's retransmission timer, if armed, and the deadline it is armed for.
    private var layerTimer: (token: UInt64, deadline: MonotonicInstant)?
    /// The layer's handshake deadline, armed at start and dropped once ready.
    private var handshakeTimer: UInt64?
    /// What the channel carried (its own count: a listener's peers share one socket).
    private var traffic = ConnectionTraffic()
    package var trafficObserver: ((ConnectionTraffic) -> Void)?

    package init(loop: EventLoop, describe: @escaping (any Error) -> any Error) {
        self.loop = loop
        self.describe = describe
    }

    package var facts: ConnectionFacts {
        var facts = ConnectionFacts(
            negotiatedALPN: layer?.negotiatedALPN, localAddress: localAddress, remoteAddress: remoteAddress, unixPath: unixPath)
        facts.security = layer?.securityFacts
        return facts
    }
    /// A Unix-domain client's socket file (its addresses are then stand-ins).
    private var unixPath: String?

    /// The socket's counters (nil before the channel has a socket).
    package var socketCounters: SocketCounters? { transport?.socket.counters }

    /// The largest payload a send may carry to the peer.
    package var maximumPayload: Int {
        if let layer { return layer.maximumMessageSize }
        return remoteAddress?.isIPv6 == true ? Self.maximumPayloadIPv6 : Self.maximumPayloadIPv4
    }

    /// What serves the channel before it has a socket: released if the channel ends first.
    package func setStandIn(_ standIn: ChannelStandIn) {
        self.standIn = standIn
    }

    /// Takes over `transport` for the peer at `remote`, sending from `local`, in place of the
    /// transport it had, if any (a UDP client that moved to another address). Call on the loop.
    package func attach(
        transport: any DatagramChannelTransport, remote: SocketAddress, local: SocketAddress, unixPath: String? = nil,
        context: LoopContext
    ) {
        self.unixPath = unixPath
        standIn = nil
        guard finalError == nil else {
            transport.release(self, context: context)
            return
        }
        if let previous = self.transport, previous !== transport {
            previous.release(self, context: context)
            // The new socket is empty: what waited for the old one to drain goes to it.
            awaitingWritable = false
        }
        self.transport = transport
        remoteAddress = remote
        localAddress = local
        lastActivity = context.now
        if let layer, !isReady {
            // Ready once the layer's handshake completes (`runLayer`).
            // Weakly: the channel owns the layer, and a strong reference back would keep both.
            let channel = LoopBound(WeakDatagramChannel(self), on: context.loop)
            layer.requestProcessing = {
                channel.loop.execute { context in channel.value.channel?.runLayer(context) }
            }
            let timeout = layer.handshakeTimeout
            if handshakeTimer == nil {
                handshakeTimer = context.schedule(at: context.now + timeout) { [weak self] context in
                    self?.handshakeTimer = nil
                    self?.fail(DatagramChannelError.handshakeTimedOut(timeout), context: context)
                }
            }
            do {
                try layer.start()
            } catch {
                fail(error, context: context)
                return
            }
            runLayer(context)
            return
        }
        becomeReady(context)
    }

    private func becomeReady(_ context: LoopContext) {
        isReady = true
        if let handshakeTimer { context.deregister(handshakeTimer) }
        handshakeTimer = nil
        outbox.publish(maximumSize: maximumPayload)
        let waiting = waitingSends
        waitingSends.removeAll()
        for (datagram, ecn, completion) in waiting { sendDatagram(datagram, ecn: ecn, context: context, completion: completion) }
        delegate?.channelBecameReady(self)
        sendQueued(context)
    }

    // MARK: Receiving

    /// Datagrams of the current socket read, not yet in the inbox.
    @exclusivity(unchecked) private var arrivals = ReceivedDatagramBatch()

    /// Loop: a datagram from the peer arrived. It waits with the others of the same socket read
    /// until `deliverArrivals()`, which hands them to the inbox together. Returns true for the
    /// first datagram since the last delivery (the caller notes the channel for it).
    package func arrived(_ bytes: UnsafeRawBufferPointer, metadata: DatagramMetadata, context: LoopContext) -> Bool {
        guard finalError == nil else { return false }
        traffic.packetsReceived &+= 1
        traffic.bytesReceived &+= UInt64(bytes.count)
        if let layer {
            // The layer decrypts at `deliverArrivals`, once per socket read.
            let first = !layerHasArrivals
            if first { lastActivity = context.now }
            layerMetadata = metadata
            if !layer.receive(bytes) {
                // More of one socket read than the layer holds: it takes what it has first
                // (UDP's own loss is the sender's business, not a queue's between two loops).
                runLayer(context)
                if finalError != nil { return false }
                if !layer.receive(bytes) { countLayerDrop() }
            }
            layerHasArrivals = true
            layerContext = context
            return first
        }
        // One clock read per socket read, not per datagram: they arrived together.
        let first = arrivals.isEmpty
        if first { lastActivity = context.now }
        arrivals.append(bytes, metadata: metadata)
        return first
    }

    /// Loop: hands the datagrams of the last socket read to the inbox, in one lock round with at
    /// most one wake-up of a reader (one per datagram cost the receiver a lock round each,
    /// contended by its reader).
    package func deliverArrivals() {
        if layerHasArrivals, let context = layerContext {
            layerHasArrivals = false
            layerContext = nil
            runLayer(context)
        }
        arrivals.deliver(to: inbox)
    }

    /// Datagrams from the peer the layer could not take even after running (a DTLS engine
    /// waiting for the application's verdict holds `DTLSConnection.inboxLimit`).
    package private(set) var layerDroppedDatagrams = 0

    /// Datagrams from the peer dropped on the way up: the layer's, and the inbox's beyond its
    /// backlog (an application not reading).
    package var droppedDatagrams: Int { layerDroppedDatagrams + inbox.droppedCount }

    private func countLayerDrop() {
        layerDroppedDatagrams += 1
        // Once per connection, then every 1,024th: a flood must not flood the log too.
        if layerDroppedDatagrams == 1 || layerDroppedDatagrams.isMultiple(of: 1024) {
            logger.notice(
                "dropped \(layerDroppedDatagrams) datagram(s) from \(remoteAddress.map { "\($0)" } ?? "the peer") that the connection's security layer could not queue (it waits for the application's verdict on the peer)")
        }
    }

    package var logger = BraidLog.logger(label: "braid.datagram")

    /// The layer was given datagrams since it last ran.
    private var layerHasArrivals = false
    /// The metadata of the last datagram the layer was given (the layer's messages carry it).
    private var layerMetadata: DatagramMetadata?
    /// The context of the socket read the layer's datagrams came in, for `deliverArrivals`
    /// (which the transports call without one); held only until then.
    private var layerContext: LoopContext?

    /// Runs the layer: its messages go to the inbox, its datagrams to the socket, its timer is
    /// armed; the channel becomes ready when the layer does, and fails when it fails (after
    /// sending what the layer queued, an alert).
    private func runLayer(_ context: LoopContext) {
        guard let layer, finalError == nil else { return }
        guard let metadata = layerMetadata ?? remoteAddress.flatMap({ remote in localAddress.map { DatagramMetadata(remote: remote, local: $0) } })
        else { return }
        do {
            let ready = try layer.process { message in
                arrivals.append(message, metadata: metadata)
            }
            drainLayer(context)
            arrivals.deliver(to: inbox)
            if layer.peerClosed {
                // RFC 6347 (as TLS 1.2): answer close_notify with our own and end at once; the
                // messages that came before it stay readable.
                layer.close()
                drainLayer(context)
                fail(DatagramChannelError.peerClosed, context: context)
                return
            }
            armLayerTimer(context)
            if ready && !isReady { becomeReady(context) }
        } catch {
            drainLayer(context)
            fail(error, context: context)
        }
    }

    /// Moves the layer's datagrams to the socket.
    private func drainLayer(_ context: LoopContext) {
        guard let layer else { return }
        var any = false
        while let datagram = layer.popOutput() {
            unsent.append((Data(datagram), .notECT))
            any = true
        }
        if any && !awaitingWritable { write(context) }
    }

    private func armLayerTimer(_ context: LoopContext) {
        guard let timeout = layer?.timeout else {
            if let layerTimer { context.deregister(layerTimer.token) }
            layerTimer = nil
            return
        }
        let deadline = context.now + timeout
        if let layerTimer {
            if layerTimer.deadline == deadline { return }
            context.deregister(layerTimer.token)
        }
        let token = context.schedule(at: deadline) { [weak self] context in
            self?.layerTimer = nil
            self?.runLayer(context)
        }
        layerTimer = (token, deadline)
    }

    // MARK: Sending

    /// Loop: one send the outbox could not take (before ready, or larger than it allows), or
    /// one marked with `ecn` (RFC 3168; the outbox carries unmarked datagrams only).
    package func sendDatagram(_ datagram: Data, ecn: ECN = .notECT, context: LoopContext, completion: Completion<Void>) {
        if let finalError {
            completion.resume(.failure(finalError))
            return
        }
        guard isReady else {
            waitingSends.append((datagram, ecn, completion))
            return
        }
        guard datagram.count <= maximumPayload else {
            completion.resume(.failure(describe(DatagramChannelError.datagramTooLarge(size: datagram.count, maximum: maximumPayload))))
            return
        }
        // What the outbox holds was sent first: it goes first (the outbox's bound still holds
        // its senders back; this takes what they queued, not more).
        appendQueued()
        do {
            try enqueue(datagram, ecn: ecn)
        } catch {
            completion.resume(.failure(describe(error)))
            return
        }
        completion.resume(.success(()))
        write(context)
    }

    /// Loop: the drain pass a burst of sends posted; takes everything queued and writes it.
    package func sendQueued(_ context: LoopContext) {
        guard finalError == nil, isReady, !awaitingWritable else { return }
        appendQueued()
        write(context)
        if let layerFailure {
            self.layerFailure = nil
            fail(layerFailure, context: context)
        }
    }

    /// What `appendQueued` took from the outbox, passed back and forth with the outbox's own
    /// queue (empty between passes).
    @exclusivity(unchecked) private var taken = Deque<Data>()

    /// Moves everything the outbox holds to `unsent`, unmarked.
    private func appendQueued() {
        outbox.take(upTo: .max, into: &taken)
        while let datagram = taken.popFirst() {
            do {
                try enqueue(datagram, ecn: .notECT)
            } catch {
                // The outbox refuses what exceeds `maximumPayload`, so only a failing layer
                // lands here: the connection ends with its error.
                layerFailure = error
                taken.removeAll(keepingCapacity: true)
                return
            }
        }
    }

    /// A layer's failure while sealing, ending the channel after the current write.
    private var layerFailure: (any Error)?

    /// Queues one datagram for the socket: as it is, or sealed by the layer.
    private func enqueue(_ datagram: Data, ecn: ECN) throws {
        guard let layer else {
            unsent.append((datagram, ecn))
            return
        }
        try datagram.withUnsafeBytes { try layer.seal($0) }
        while let sealed = layer.popOutput() { unsent.append((Data(sealed), ecn)) }
    }

    /// Loop: the socket drained.
    package func writable(_ context: LoopContext) {
        awaitingWritable = false
        guard finalError == nil else { return }
        sendQueued(context)
    }

    private func write(_ context: LoopContext) {
        guard let transport, let remoteAddress, let localAddress else { return }
        let socket = transport.socket
        if !unsent.isEmpty { lastActivity = context.now }
        var metadata = DatagramMetadata(remote: remoteAddress, local: localAddress)
        while !unsent.isEmpty {
            guard let slot = socket.freeSlot else {
                if socket.flush() { continue }
                awaitingWritable = true
                transport.waitForWritable(self, context: context)
                return
            }
            // One batch: datagrams of the first one's size and mark, the last of the run may be
            // shorter. Each is taken out of the queue (and put back if it does not fit), not
            // copied out of it: a copy retained its bytes.
            var segmentSize = 0
            var ecn = ECN.notECT
            var length = 0
            var segments = 0
            while let next = unsent.popFirst() {
                let size = next.content.count
                if segments == 0 {
                    segmentSize = size
                    ecn = next.ecn
                } else {
                    guard segmentSize <= Self.coalescedSegmentLimit, size <= segmentSize, next.ecn == ecn,
                        segments < UDPSegmentation.maxSegments, length + size <= slot.count
                    else {
                        unsent.prepend(next)
                        break
                    }
                }
                next.content.withUnsafeBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: slot[length..<length + bytes.count]).copyMemory(from: bytes)
                }
                length += size
                segments += 1
                if size < segmentSize { break }
            }
            metadata.ecn = ecn
            socket.commitSlot(metadata, segmentSize: segmentSize, length: length)
            hasSent = true
            traffic.packetsSent &+= UInt64(segments)
            traffic.bytesSent &+= UInt64(length)
        }
        if !socket.flush() {
            awaitingWritable = true
            transport.waitForWritable(self, context: context)
        }
    }

    // MARK: Buffer accounting

    /// Bytes the connection holds now (a listener's buffer limit counts them): received
    /// datagrams the application has not read (each with its entry), sends queued or waiting
    /// for the socket, and the layer's queues.
    package var bufferedBytes: Int {
        var total = inbox.heldBytes + outbox.heldBytes + (layer?.bufferedBytes ?? 0)
        for entry in unsent { total += entry.content.count }
        for (datagram, _, _) in waitingSends { total += datagram.count }
        return total
    }

    /// Bytes drained from what the connection holds so far: written to the socket, and read by
    /// the application (datagrams received from the peer do not count: a peer could send a
    /// trickle to look busy).
    package var drainedBytes: UInt64 { traffic.bytesSent &+ inbox.bytesTaken }

    /// Ends the channel with `error` (a listener over its buffer limit closes it), telling a
    /// layer's peer first (DTLS: close_notify) as far as the socket takes it now; what was
    /// queued is dropped, and so are the received datagrams the application has not read.
    package func close(with error: any Error, context: LoopContext) {
        guard finalError == nil else { return }
        if let layer, isReady {
            unsent.removeAll()
            layer.close()
            drainLayer(context)
        }
        fail(error, context: context)
        inbox.discardQueued()
    }

    // MARK: Ending

    /// Ends the channel with `error` at once: pending calls fail, the transport is released.
    package func fail(_ error: any Error, context: LoopContext) {
        guard endCalls(with: error) else { return }
        if let layerTimer { context.deregister(layerTimer.token) }
        layerTimer = nil
        if let handshakeTimer { context.deregister(handshakeTimer) }
        handshakeTimer = nil
        standIn?.release(context)
        standIn = nil
        if let transport {
            self.transport = nil
            transport.release(self, context: context)
        }
        reportTraffic()
    }

    /// Ends every pending call with `error` before the channel has a socket (on the loop; no
    /// context needed: there is no socket to release, and the stand-in is dropped).
    package func fail(_ error: any Error) {
        guard endCalls(with: error) else { return }
        standIn = nil
        reportTraffic()
    }

    private func reportTraffic() {
        guard let observer = trafficObserver else { return }
        trafficObserver = nil
        observer(traffic)
    }

    /// Records the end (once), tells the delegate (which hears first, so a reader woken by the
    /// end already sees the connection's final state, its error rather than a plain end) and
    /// fails every pending call; false if the channel had ended already.
    private func endCalls(with error: any Error) -> Bool {
        guard finalError == nil else { return false }
        let error = describe(error)
        finalError = error
        hasEnded = true
        delegate?.channel(self, endedWith: error)
        outbox.fail(error)
        inbox.finish()
        arrivals.release()
        unsent.removeAll()
        let waiting = waitingSends
        waitingSends.removeAll()
        for (_, _, completion) in waiting { completion.resume(.failure(error)) }
        return true
    }

    /// Sends what the application already handed over (as far as the socket takes it now),
    /// then ends the channel with `cancelled`.
    package func cancel(context: LoopContext) {
        guard finalError == nil else { return }
        sendQueued(context)
        if let layer, isReady {
            // close_notify goes out after what the application sent.
            layer.close()
            drainLayer(context)
        }
        fail(DatagramChannelError.cancelled, context: context)
    }
}

/// A datagram channel's own failures, before the public layer describes them.
package enum DatagramChannelError: Error, Equatable {
    /// A send larger than UDP allows toward the peer.
    case datagramTooLarge(size: Int, maximum: Int)
    /// The application cancelled the connection.
    case cancelled
    /// A listener's connection heard nothing and sent nothing for its idle timeout.
    case idleTimeout
    /// A listener at its connection limit closed this connection, whose peer had not proven it
    /// receives what it is sent, to make room for a new peer.
    case displaced
    /// The layer (DTLS) did not become ready within its handshake timeout.
    case handshakeTimedOut(Duration)
    /// A listener over its buffer limit closed this connection: it held the most bytes among
    /// those that drained too slowly (its application did not read what the peer sent).
    case overBufferLimit
    /// The peer ended the session (DTLS close_notify).
    case peerClosed
}

/// A channel a layer may call back without keeping it alive.
private struct WeakDatagramChannel {
    weak var channel: DatagramChannel?
    init(_ channel: DatagramChannel) { self.channel = channel }
}

/// A client connection's own UDP socket: reads it, passing on only the peer's datagrams (the
/// kernel filters a connected socket already; an in-memory socket may not), and tells the
/// channel when it drains.
package final class DatagramClientTransport: DatagramChannelTransport, LoopHandler {
    package let socket: any DatagramSocket
    private weak var channel: DatagramChannel?
    private let remote: SocketAddress
    private var token: UInt64?

    package init(socket: any DatagramSocket, remote: SocketAddress) {
        self.socket = socket
        self.remote = remote
    }

    /// Registers the socket and hands it to `channel`, which becomes ready.
    package func start(_ channel: DatagramChannel, context: LoopContext) {
        self.channel = channel
        do {
            token = try socket.register(self, in: context)
        } catch {
            socket.close()
            channel.fail(error, context: context)
            return
        }
        channel.attach(
            transport: self, remote: remote, local: socket.localAddress, unixPath: (socket as? UnixDatagramSocket)?.path.path,
            context: context)
    }

    package func waitForWritable(_ channel: DatagramChannel, context: LoopContext) {
        if let token { context.setWantsWritable(token, true) }
    }

    package func release(_ channel: DatagramChannel, context: LoopContext) {
        if let token { context.deregister(token) }
        token = nil
        socket.close()
    }

    package func readable(_ context: LoopContext) {
        // The datagrams of this event's reads go to the inbox together, once the reads are
        // done: one hand-off (and at most one wake of a reader) per event, not per read.
        defer { channel?.deliverArrivals() }
        // A bounded number of rounds per event, so one busy socket cannot starve the loop.
        for _ in 0..<4 {
            var any = false
            let received = socket.receive { bytes, metadata in
                any = true
                guard metadata.remote == remote else { return }
                _ = channel?.arrived(bytes, metadata: metadata, context: context)
            }
            guard received, any else { return }
        }
    }

    package func writable(_ context: LoopContext) {
        if let token { context.setWantsWritable(token, false) }
        channel?.writable(context)
    }

    package func timerFired(_ context: LoopContext) {}

    package func close(_ context: LoopContext) {
        channel?.fail(DatagramChannelError.cancelled, context: context)
    }
}
