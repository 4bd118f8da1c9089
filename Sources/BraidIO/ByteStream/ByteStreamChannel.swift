import BraidCore
import DequeModule
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// One byte-stream connection's owner on its loop (TCP, or a layer such as TLS over TCP): the
/// socket, the layer over it if any (`ByteStreamLayer`), and the connection's one byte stream in
/// each direction, whose inbox and outbox the application's tasks use directly (see
/// `StreamInbox`, `StreamOutbox`). The channel knows no engine: what a layer does is behind its
/// protocol.
///
/// Layering: without a layer, the socket reads into the inbox's memory and writes sends from
/// the outbox's, and the layer's branches cost a nil check. With one, the socket reads into
/// the layer's input, what the layer delivers is written into the inbox's memory, and sends go
/// through the layer into its output, which the socket writes in place.
///
/// Receiving: the socket is read while the inbox holds less than `receiveLimit` unread bytes
/// (or a receive waits for more), each read sized to the room left, so unread bytes stay
/// within `receiveLimit` plus one `minimumRead`; past that, reading stops, the kernel's buffer
/// fills and TCP's window stops the peer, so memory stays bounded however slowly the
/// application reads. The inbox's consumed-credit passes restart reading.
///
/// Closing: `cancel()` ends the calls at once but closes gracefully (see `cancel`).
///
/// Sending: queued sends go to the socket (without a copy) or through the layer into its
/// bounded output and out with one write per buffer where the socket takes it; when the socket
/// is full, the channel waits for it to drain, and the outbox's bound holds the senders back.
package final class ByteStreamChannel: LoopHandler, ConnectionChannel {
    package let loop: EventLoop
    package weak var delegate: ConnectionChannelDelegate?
    package let inbox = StreamInbox()
    package let outbox: StreamOutbox
    /// Unread bytes kept before the socket is no longer read.
    package let receiveLimit: Int
    /// Socket reads per readiness event before other connections get their turn.
    static let readsPerEvent = 16
    /// The smallest read, and the smallest room asked of a layer's input: one full TLS record.
    static let minimumRead = 16 * 1024 + 256
    /// Without a layer: the smallest free space read into; less left in the current chunk
    /// starts a new one.
    static let minimumPlainRead = 4 * 1024
    /// The largest chunk received bytes are read (no layer) or delivered by the layer into: a
    /// bulk reader moves up to this much per system call.
    static let largestReceiveChunk = 256 * 1024
    /// Where received bytes (as read, or as the layer delivers them) are written for the inbox.
    private var receiveWriter = InboxWriter(largestChunk: ByteStreamChannel.largestReceiveChunk)
    /// Turns the layer's, the datapath's and internal errors into the caller's error type.
    let describe: (any Error) -> any Error
    /// How long the layer may take to become ready.
    private let handshakeTimeout: Duration

    private var socket: (any ByteStreamSocket)?
    package var trafficObserver: ((ConnectionTraffic) -> Void)?
    package var logger = BraidLog.logger(label: "braid.connection")
    /// The layer between the socket and the byte stream (TLS); nil: the socket carries the
    /// stream's bytes as they are.
    package private(set) var layer: (any ByteStreamLayer)?
    private var token: UInt64?
    private var standIn: ChannelStandIn?
    package private(set) var isReady = false
    package private(set) var finalError: (any Error)?
    /// Reading stopped: the inbox is full, or the peer finished its side.
    private var readingPaused = false
    /// The layer reported `.awaitingDecision`: reading stays off until it asks for a pass.
    private var layerAwaitsDecision = false
    private var peerFinished = false
    /// Waiting for the socket to drain before writing more.
    private var awaitingWritable = false
    /// The end of stream was handed to the layer (close_notify) or is due once the writes drain.
    private var endOfStreamQueued = false
    /// Without a layer: sends taken from the outbox and not yet all written, oldest first, in
    /// the caller's own memory (no copy). They go out together, up to
    /// `TCPSocket.maxWriteRegions` per sendmsg, so a burst of small sends (a message framer's
    /// messages) costs one system call instead of one each.
    private var unwritten = Deque<(bytes: StreamBytes, offset: Int, end: Int)>()
    private var unwrittenByteCount = 0
    /// Sends are taken from the outbox while fewer bytes than this are unwritten.
    static let unwrittenLimit = 64 * 1024
    /// A send at least this large, with nothing unwritten before it, is written straight from
    /// the outbox instead (gathering buys a large send nothing, and bulk sends passed through
    /// `unwritten` measured lower goodput).
    static let directWriteMinimum = 16 * 1024
    private var writeSideShut = false
    /// Cancelled while connected: what the application already handed over still goes out,
    /// then the layer's end (close_notify) and FIN, and the socket closes once the peer
    /// finishes too (or at `closeTimeout`). Calls have ended already (`finalError` is set).
    private var closing = false
    /// How long a graceful close may take before the socket is closed regardless.
    package static let closeTimeout: Duration = .seconds(10)
    /// The channel still moves bytes: running, or closing gracefully.
    private var isActive: Bool { finalError == nil || closing }

    package init(loop: EventLoop, sendLimit: Int, receiveLimit: Int, handshakeTimeout: Duration, describe: @escaping (any Error) -> any Error) {
        self.loop = loop
        self.receiveLimit = receiveLimit
        self.handshakeTimeout = handshakeTimeout
        self.describe = describe
        outbox = StreamOutbox(limit: sendLimit, open: false)
    }

    package var localAddress: SocketAddress? { socket?.localAddress }
    /// Whether the connection runs Multipath TCP now (false for TCP, and for an MPTCP socket
    /// that fell back to TCP because the peer or a middlebox lacks MPTCP).
    package var multipathInEffect: Bool {
        guard let socket, socket.isMultipath else { return false }
        return (socket as? TCPSocket)?.multipathInEffect() ?? true
    }
    package var remoteAddress: SocketAddress? { socket?.remoteAddress }

    /// Bytes the connection holds now (a listener's buffer limit counts them): sends queued or
    /// not yet written, received bytes not yet read, and the layer's buffers.
    package var bufferedBytes: Int {
        outbox.heldBytes + inbox.available + (layer.map { $0.bufferedInputCount + $0.pendingOutputCount } ?? 0)
    }

    /// Bytes drained from what the connection holds so far: written to the socket, and read by
    /// the application. Bytes received from the peer do not count: a peer that never reads
    /// could otherwise trickle a byte now and then to look busy.
    package var drainedBytes: UInt64 {
        (socket?.counters.bytesSent ?? 0) &+ inbox.bytesRead
    }

    package var facts: ConnectionFacts {
        var facts = ConnectionFacts(
            negotiatedALPN: layer?.negotiatedALPN, earlyDataAccepted: layer?.earlyDataAccepted ?? false,
            resumed: layer?.isResumed ?? false, multipath: multipathInEffect, localAddress: localAddress,
            remoteAddress: remoteAddress, unixPath: socket?.unixPath)
        facts.security = layer?.securityFacts
        facts.upgrade = layer?.upgradeFacts
        return facts
    }

    /// An integer socket option of the connection's socket (nil without a TCP socket), for tests.
    package func socketOptionForTesting(level: Int32, name: Int32) -> Int32? {
        guard let socket = socket as? TCPSocket else { return nil }
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket.fd, level, name, &value, &length) == 0 else { return nil }
        return value
    }

    /// Tests: bytes received and not yet taken above — in the layer's input and in the
    /// socket's receive queue (FIONREAD).
    package func unprocessedInputForTesting() -> Int {
        var queued: Int32 = 0
        if let socket = socket as? TCPSocket { _ = ioctl(socket.fd, UInt(FIONREAD), &queued) }
        return Int(queued) + (layer?.bufferedInputCount ?? 0)
    }

    /// What serves the channel before its socket is attached: released if the channel ends first.
    package func setStandIn(_ standIn: ChannelStandIn) {
        self.standIn = standIn
    }

    /// Takes over a connected socket and the layer that runs over it, if any (its handshake
    /// starts now; the channel is ready when the layer is, at once without one). Call on the
    /// loop. When the layer `sendsEarlyData` (a TLS client resuming with a ticket that allows
    /// it), sends the caller queued as idempotent before this call travel as early data, in
    /// the first flight.
    package func attach(socket: any ByteStreamSocket, layer: (any ByteStreamLayer)?, context: LoopContext) {
        standIn = nil
        guard finalError == nil else {
            socket.close()
            return
        }
        self.socket = socket
        self.layer = layer
        do {
            // The socket may still be registered for the connect that won: registering again
            // hands that registration over to this channel.
            token = try socket.register(self, in: context)
        } catch {
            fail(error, context: context)
            return
        }
        logger.debug("socket connected", metadata: ["peer": "\(socket.remoteAddress)", "layer": "\(layer.map { "\(type(of: $0))" } ?? "none")"])
        if let layer {
            // Weakly: the channel owns the layer, and a strong reference back would keep both.
            let channel = LoopBound(WeakByteStreamChannel(self), on: context.loop)
            layer.eventLoop = context.loop
            layer.requestProcessing = {
                channel.loop.execute { context in channel.value.channel?.layerRequestedProcessing(context) }
            }
            if let token { context.setTimer(token, at: context.now + handshakeTimeout) }
            if layer.sendsEarlyData { queueEarlyData(layer, context: context) }
            advance(context)
        } else {
            becomeReady(context)
        }
    }

    /// Hands the idempotent sends queued so far (in order, up to the first that is not) to
    /// the layer as early data, as much as it takes; the rest waits for the handshake.
    private func queueEarlyData(_ layer: any ByteStreamLayer, context: LoopContext) {
        var failure: (any Error)?
        outbox.drain { entry -> Int? in
            // A send that ends the stream waits for the handshake whole: its close_notify
            // cannot travel as early data.
            guard entry.idempotent, !entry.endOfStream, entry.offset < entry.count else { return nil }
            do {
                return entry.offset + (try entry.withBytes(from: entry.offset) { try layer.sendEarly($0) })
            } catch {
                failure = describe(error)
                throw failure!
            }
        } unacknowledged: {
            layer.heldByteCount
        }
        if let failure { fail(failure, context: context) }
    }

    private func becomeReady(_ context: LoopContext) {
        guard !isReady else { return }
        isReady = true
        if let token { context.setTimer(token, at: nil) }
        delegate?.channelBecameReady(self)
        outbox.open()
        pump(context)
    }

    // MARK: LoopHandler

    package func readable(_ context: LoopContext) {
        readSocket(context)
    }

    package func writable(_ context: LoopContext) {
        awaitingWritable = false
        socket?.setWantsWritable(false)
        flush(context)
        pump(context)
    }

    package func timerFired(_ context: LoopContext) {
        if closing {
            // The peer did not take the rest, or did not finish, in time.
            closing = false
            release(context)
            return
        }
        guard !isReady, finalError == nil else { return }
        fail(ByteStreamError.handshakeTimedOut(handshakeTimeout), context: context)
    }

    package func close(_ context: LoopContext) {
        fail(CancellationError(), context: context)
    }

    // MARK: Receiving

    /// Reads what the socket has (a bounded number of times per event), through the layer
    /// when there is one, into the inbox.
    private func readSocket(_ context: LoopContext) {
        guard let socket, isActive else { return }
        var reads = 0
        while !readingPaused, isActive, reads < Self.readsPerEvent {
            reads += 1
            // Read no more than the inbox has room for (at least one record's worth), so the
            // bound is overshot by less than one read.
            let room = max(Self.minimumRead, receiveLimit - inbox.available)
            let result: StreamReadResult
            do {
                if let layer {
                    // Straight into the layer's input.
                    var outcome = StreamReadResult.wouldBlock
                    _ = try layer.withInputSpace(minimum: Self.minimumRead) { space in
                        outcome = try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: space[..<min(space.count, room)]))
                        if case .bytes(let count) = outcome { return count }
                        return 0
                    }
                    result = outcome
                } else {
                    // Straight into the inbox's memory: the kernel's copy is the only one.
                    let space = receiveWriter.space(minimum: Self.minimumPlainRead)
                    result = try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: space[..<min(space.count, room)]))
                    if case .bytes(let count) = result {
                        receiveWriter.didWrite(count)
                        inbox.fill(publishing: &receiveWriter)
                    }
                }
            } catch {
                fail(error, context: context)
                return
            }
            switch result {
            case .bytes:
                if layer != nil { advance(context) }
            case .wouldBlock:
                return
            case .endOfStream:
                peerEnded(context)
                return
            }
            pauseReadingIfFull(context)
        }
    }

    /// The peer closed its side of TCP. With a layer, that is clean only if the layer says so
    /// (TLS: after close_notify), and the stream ends once the layer has delivered the input it
    /// still holds (a later pass reports `.peerFinished`).
    private func peerEnded(_ context: LoopContext) {
        peerFinished = true
        setReading(false, context: context)
        if closing {
            // Both sides are done: nothing the peer sends can reset what we sent any more.
            if writeSideShut {
                closing = false
                release(context)
            }
            return
        }
        if let layer {
            do {
                if try layer.endOfInput() { return }
            } catch {
                fail(error, context: context)
                return
            }
        }
        inbox.fill { _ in .finished }
    }

    /// Runs the layer over what arrived: handshake progress, bytes for above into the inbox,
    /// events; then writes what the layer has to send.
    private func advance(_ context: LoopContext) {
        guard let layer, isActive else { return }
        var events: ByteStreamLayerEvents = []
        var failure: (any Error)?
        if closing {
            // Nobody reads any more: what arrives is processed and dropped.
            do { events = try layer.process { _ in } } catch { failure = error }
        } else {
            // Delivered outside the inbox's lock, into its memory, so a receive never waits on
            // the layer and the inbox takes the batch over without a copy (TLS's plaintext is
            // shorter than the ciphertext it came from, so one chunk holds it).
            receiveWriter.reserve(layer.bufferedInputCount)
            do {
                events = try layer.process { region in receiveWriter.write(region) }
            } catch {
                failure = error
            }
            // Ready before the bytes that came with the handshake's end are published, so whoever
            // receives them already sees what the handshake agreed.
            if events.contains(.becameReady) && failure == nil { becomeReady(context) }
            inbox.fill(publishing: &receiveWriter)
            if events.contains(.peerFinished) { inbox.fill { _ in .finished } }
            if events.contains(.awaitingDecision) && failure == nil {
                layerAwaitsDecision = true
                setReading(false, context: context)
            }
        }
        flush(context)
        if let failure { fail(failure, context: context) }
    }

    /// The layer has what it waited for, or work of its own: read again and let it process
    /// what it held.
    private func layerRequestedProcessing(_ context: LoopContext) {
        guard isActive else { return }
        guard layerAwaitsDecision else {
            // Work of the layer's own (a framer's timer or queued block): one more pass.
            advance(context)
            return
        }
        layerAwaitsDecision = false
        advance(context)
        guard isActive, !layerAwaitsDecision, !peerFinished else { return }
        setReading(true, context: context)
        readSocket(context)
    }

    private func pauseReadingIfFull(_ context: LoopContext) {
        // A closing channel reads (and drops) until the peer's FIN.
        guard !closing else { return }
        if inbox.available >= receiveLimit && inbox.waitingReceives == 0 { setReading(false, context: context) }
    }

    private func setReading(_ on: Bool, context: LoopContext) {
        guard readingPaused == on else { return }
        readingPaused = !on
        socket?.setWantsReadable(on)
    }

    /// The application consumed bytes (or a receive waits for more than is here): read again
    /// if there is room.
    package func returnConsumedCredit(_ context: LoopContext) {
        _ = inbox.takeCredit()
        guard readingPaused, !peerFinished, !layerAwaitsDecision, finalError == nil else { return }
        if inbox.available < receiveLimit || inbox.waitingReceives > 0 {
            setReading(true, context: context)
            readSocket(context)
        }
    }

    // MARK: Sending

    /// Hands queued sends on while the socket (or the layer's bounded output) takes them; each
    /// waiting send completes once all of its bytes are taken.
    package func pump(_ context: LoopContext) {
        guard let socket, isReady, isActive, !awaitingWritable else { return }
        // What the socket or the layer threw while taking bytes: the outbox fails its senders
        // with it, and the connection ends with it.
        var failure: (any Error)?
        if let layer {
            // Hand sends to the layer until its output is full, write it, and go on while the
            // socket takes it all and sends are queued. Small sends share records (TLS), sealed
            // before each write, so nothing waits in the layer past this pass.
            var layerFull = true
            while layerFull, failure == nil, !awaitingWritable, isActive {
                layerFull = false
                outbox.drain { entry -> Int? in
                    var offset = entry.offset
                    while offset < entry.count {
                        let taken: Int
                        do {
                            taken = try entry.withBytes(from: offset) { try layer.send($0) }
                        } catch {
                            failure = describe(error)
                            throw failure!
                        }
                        if taken == 0 {
                            layerFull = true
                            break
                        }
                        offset += taken
                    }
                    if offset == entry.count && entry.endOfStream {
                        layer.close()
                        endOfStreamQueued = true
                    }
                    return offset
                } unacknowledged: {
                    layer.heldByteCount
                }
                if failure == nil {
                    do {
                        try layer.seal()
                    } catch {
                        failure = describe(error)
                    }
                }
                flush(context)
            }
        } else {
            // Write what is unwritten, take more sends, and go on while the socket takes it all.
            while failure == nil, !awaitingWritable {
                if let error = writeUnwritten(context) {
                    failure = error
                    break
                }
                outbox.engineHolds(unwrittenByteCount)
                guard !awaitingWritable else { break }
                var took = false
                outbox.drain { entry -> Int? in
                    guard unwrittenByteCount < Self.unwrittenLimit, !awaitingWritable else { return nil }
                    var offset = entry.offset
                    if unwrittenByteCount == 0 && entry.count - offset >= Self.directWriteMinimum {
                        // A large send alone: written from the outbox, done once the kernel
                        // has it all, as bulk transfers always were.
                        do {
                            while offset < entry.count {
                                let written = try entry.withBytes(from: offset) { unsent in try socket.write { $0.append(unsent) } }
                                if written == 0 {
                                    awaitWritable(context)
                                    break
                                }
                                offset += written
                            }
                        } catch {
                            failure = describe(error)
                            throw failure!
                        }
                    } else if offset < entry.count {
                        if let bytes = entry.bytes {
                            unwritten.append((bytes, offset, entry.count))
                        } else {
                            // A borrowed send cannot wait beyond this call: copied now (only
                            // when it comes behind small sends not yet written).
                            let copy = entry.withBytes(from: offset) { StreamBytes(copying: $0) }
                            unwritten.append((copy, 0, copy.count))
                        }
                        unwrittenByteCount += entry.count - offset
                        offset = entry.count
                    }
                    if offset == entry.count && entry.endOfStream { endOfStreamQueued = true }
                    took = offset > entry.offset || entry.endOfStream
                    return offset
                } unacknowledged: {
                    unwrittenByteCount
                }
                if !took { break }
            }
            shutWriteSideIfDone(context)
        }
        if let failure {
            fail(failure, context: context)
        } else if closing && outbox.isEmpty {
            finishClosing(context)
        }
    }

    /// Without a layer: writes the unwritten sends, gathered, until they are all out or the
    /// socket is full (then waits for it to drain). Returns the socket's error, if it failed.
    private func writeUnwritten(_ context: LoopContext) -> (any Error)? {
        guard let socket else { return nil }
        while unwrittenByteCount > 0 {
            let written: Int
            do {
                written = try socket.write { regions in
                    for item in unwritten {
                        guard regions.append(UnsafeRawBufferPointer(rebasing: item.bytes.base[item.offset..<item.end])) else { break }
                    }
                }
            } catch {
                return describe(error)
            }
            if written == 0 {
                awaitWritable(context)
                return nil
            }
            unwrittenByteCount -= written
            var left = written
            while left > 0, var first = unwritten.first {
                let remaining = first.end - first.offset
                if left < remaining {
                    first.offset += left
                    unwritten[unwritten.startIndex] = first
                    break
                }
                left -= remaining
                unwritten.removeFirst()
            }
        }
        return nil
    }

    /// Writes what the layer has ready, from its own memory; waits for the socket when it is
    /// full.
    private func flush(_ context: LoopContext) {
        guard let socket, let layer, !awaitingWritable else { return }
        var failure: (any Error)?
        while layer.pendingOutputCount > 0 {
            var written = 0
            _ = layer.withPendingOutput { pending in
                do {
                    written = try socket.write { $0.append(pending) }
                } catch {
                    failure = error
                }
                return written
            }
            if failure != nil || written == 0 { break }
        }
        if let failure {
            fail(failure, context: context)
            return
        }
        // What the socket took is no longer the layer's: the figure the last drain recorded
        // would otherwise stay, and an idle connection would look like a stalled holder to
        // the listener's buffer limit.
        outbox.engineHolds(layer.heldByteCount)
        if layer.pendingOutputCount > 0 {
            awaitWritable(context)
        } else if !closing {
            shutWriteSideIfDone(context)
        }
    }

    private func awaitWritable(_ context: LoopContext) {
        guard !awaitingWritable else { return }
        awaitingWritable = true
        socket?.setWantsWritable(true)
    }

    /// Once the end of stream and everything before it is on the socket: TCP FIN.
    private func shutWriteSideIfDone(_ context: LoopContext) {
        guard endOfStreamQueued, !writeSideShut, !awaitingWritable, unwrittenByteCount == 0, (layer?.pendingOutputCount ?? 0) == 0
        else { return }
        writeSideShut = true
        do {
            try socket?.shutdownWrite()
        } catch {
            fail(error, context: context)
        }
    }

    // MARK: Ending

    /// Ends the channel: every pending call fails with `error` (described), the delegate is
    /// told once, and the socket closes.
    package func fail(_ error: any Error, context: LoopContext) {
        guard finalError == nil else {
            // A failure while closing gracefully ends the close.
            if closing {
                closing = false
                release(context)
            }
            return
        }
        endCalls(with: error)
        // The layer's failure may have left word for the peer (a TLS alert): one try to write it.
        if let layer, let socket, layer.pendingOutputCount > 0 {
            _ = layer.withPendingOutput { pending in (try? socket.write { $0.append(pending) }) ?? 0 }
        }
        release(context)
    }

    /// Ends every pending call with `error` before the channel has a socket.
    package func fail(_ error: any Error) {
        guard finalError == nil else { return }
        endCalls(with: error)
        standIn = nil
    }

    /// Records the end and tells the delegate (which hears first, so a caller woken by the
    /// failure already sees the final state), then fails the receives and the sends; with
    /// `keepingAcceptedSends` (a graceful close), sends that already returned stay queued.
    private func endCalls(with error: any Error, keepingAcceptedSends: Bool = false) {
        let described = describe(error)
        finalError = described
        delegate?.channel(self, endedWith: described)
        inbox.fail(described)
        if keepingAcceptedSends {
            outbox.failWaiting(described)
        } else {
            outbox.fail(described)
        }
    }

    /// Closes the connection; pending calls end with cancellation at once. A connected
    /// channel closes gracefully: sends that already returned (their bytes accepted) still go
    /// out, then the layer's end (TLS: close_notify) and FIN, and the socket closes once the peer has finished
    /// too, or after `closeTimeout`; sends still waiting fail. Before it is connected, the
    /// attempts or the socket just close.
    package func cancel(context: LoopContext) {
        guard finalError == nil else { return }
        guard socket != nil, isReady, !writeSideShut || !peerFinished else {
            let pendingStandIn = socket == nil ? standIn : nil
            fail(CancellationError(), context: context)
            pendingStandIn?.release(context)
            return
        }
        closing = true
        logger.debug("closing gracefully")
        endCalls(with: CancellationError(), keepingAcceptedSends: true)
        if let token { context.setTimer(token, at: context.now + Self.closeTimeout) }
        setReading(true, context: context)
        pump(context)
    }

    /// Closes at once with a reset (SO_LINGER 0), also during a graceful close: nothing
    /// queued goes out, no close_notify or FIN, the peer's next read or write fails with
    /// ECONNRESET, and every pending call ends with cancellation. Before it is connected, the
    /// same as `cancel`.
    package func forceCancel(context: LoopContext) {
        guard let socket, isReady else {
            cancel(context: context)
            return
        }
        if finalError == nil { endCalls(with: CancellationError()) }
        closing = false
        logger.debug("closing with a reset")
        reportTraffic(of: socket)
        socket.abort()
        self.socket = nil
        release(context)
    }

    /// Once every accepted send is out: the layer's end (close_notify), FIN, then the socket
    /// closes when the peer's FIN arrives (unread bytes at close would make the kernel send a
    /// reset, which can destroy what the peer has not read yet).
    private func finishClosing(_ context: LoopContext) {
        guard closing, !awaitingWritable else { return }
        if let layer, !layer.isClosed {
            layer.close()
            flush(context)
        }
        guard closing, !awaitingWritable, unwrittenByteCount == 0, (layer?.pendingOutputCount ?? 0) == 0 else { return }
        if !writeSideShut {
            writeSideShut = true
            try? socket?.shutdownWrite()
        }
        if peerFinished {
            closing = false
            release(context)
        }
    }

    private func release(_ context: LoopContext) {
        // Closing the socket takes it (and this channel's registration) off the loop.
        unwritten.removeAll()
        unwrittenByteCount = 0
        token = nil
        if let socket {
            logger.debug("socket closed", metadata: ["bytes_sent": "\(socket.counters.bytesSent)", "bytes_received": "\(socket.counters.bytesReceived)"])
            reportTraffic(of: socket)
        }
        socket?.close()
        socket = nil
        standIn = nil
    }

    /// Hands the observer, if any, what the connection carried: read once, as it closes.
    private func reportTraffic(of socket: any ByteStreamSocket) {
        guard let observer = trafficObserver else { return }
        trafficObserver = nil
        var traffic = ConnectionTraffic()
        traffic.bytesSent = socket.counters.bytesSent
        traffic.bytesReceived = socket.counters.bytesReceived
        if let segments = socket.segmentCounts() {
            traffic.packetsSent = segments.sent
            traffic.packetsReceived = segments.received
            traffic.retransmittedSegments = segments.retransmitted
        }
        observer(traffic)
    }
}

/// A channel a layer may call back without keeping it alive.
private struct WeakByteStreamChannel {
    weak var channel: ByteStreamChannel?

    init(_ channel: ByteStreamChannel) { self.channel = channel }
}
