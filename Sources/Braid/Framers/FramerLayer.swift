import BraidCore
import BraidIO
import DequeModule
import Foundation

/// A custom framer (`NWProtocolFramerImplementation`) as a byte-stream layer over TLS's layer
/// or, on plain TCP, a pass-through one: the framer's `handleInput` parses the bytes from below
/// into messages, its `handleOutput` writes each message sent.
///
/// Above the layer each message is a TLV record, as WebSocket's are (type: the message's
/// number in the connection's `FramerMessages`, value: its content), so the framed receive path
/// TLV uses delivers whole messages. A message the framer delivers with `deliverInputNoCopy`
/// whose bytes have not all arrived is streamed: its record's header goes up at once with the
/// full length, and its bytes pass through as they arrive, never buffered here. A record sent
/// from above is gathered whole before `handleOutput` (a send is one message).
///
/// Bounds: the input the framer has not consumed (`NWProtocolFramer.maximumBufferedInput`),
/// a delivered message (`maximumMessageSize`), what waits to go below (`outputLimit`, after
/// which the layer takes nothing more from above), and what the framer wrote in answer to
/// input that waits to go below (`outputLimit` too: past it `parseInput` offers no input and
/// `handleInput` is not called, the
/// channel stops reading and TCP's window stops the peer, until half of it has gone below).
///
/// A framer's wakeups run on the connection's loop timers (`LoopContext.schedule`), its
/// `async` blocks on the loop's pass the layer asks for.
///
/// The peer's end of stream (TCP's FIN, TLS's close_notify) waits behind input the framer
/// still holds, so the messages it delivers later are not lost: while an `async` block is
/// queued, and while input is left unconsumed (or a message partly delivered) with a wakeup to
/// come. Once neither holds, the end passes up; it is held for at most `endHoldLimit` (the
/// connection's handshake timeout), after which the connection fails with a protocol error
/// naming the bytes left, so a framer that never finishes does not wedge it.
final class FramerLayer: ByteStreamLayer, ConnectionSharingLayer {
    /// The most bytes written by the framer that may wait for the layer below before the layer
    /// takes no more from above, and the most written in answer to input before it parses no
    /// more input.
    static let outputLimit = 64 * 1024
    private static let recordHeaderSize = 8

    private let inner: any ByteStreamLayer
    private let maximumMessageSize: Int
    private let inputLimit: Int
    /// How long the peer's end may wait behind input the framer holds.
    let endHoldLimit: Duration
    /// Over datagrams (`FramerDatagramLayer`): each datagram is the framer's whole input, so a
    /// message never waits for bytes of a later one (`endDatagram()` drops what is left).
    var datagramMode = false
    private(set) var instance: NWProtocolFramer.Instance!
    private var implementation: (any NWProtocolFramerImplementation)!
    /// The connection's message table, handed over before the layer is attached.
    private var messages: FramerMessages?

    private var innerReady = false
    private var started = false
    private var framerReady = false
    private var reportedReady = false
    private var failure: NetworkError?
    /// `markFailed(error: nil)`: the framer ended the stream.
    private var framerFinished = false
    /// The layer below reported the peer's end of stream; passed up once no input is held.
    private var innerFinished = false
    /// The peer's end waits behind the framer's held input: since when (for the bound).
    private var endHeld = false
    private var cleanedUp = false

    // MARK: Input state

    /// Bytes from below the framer has not consumed, from `inputStart`.
    private var input: [UInt8] = []
    private var inputStart = 0
    private var inputPassThrough = false
    /// `handleInput`'s last answer: the buffered bytes it needs before it is called again.
    private var inputWanted = 0
    /// A `deliverInputNoCopy` waiting for bytes.
    private var pendingDelivery: PendingDelivery?
    /// A message delivered in parts (`isComplete` false) so far.
    private var partial: (message: NWProtocolFramer.Message, bytes: [UInt8])?
    /// Where deliveries go during `process`; deliveries made outside it wait in `undelivered`.
    private var deliverAbove: ((UnsafeRawBufferPointer) -> Void)?
    private var undelivered: [UInt8] = []
    /// `deliverInput` calls made while a `deliverInputNoCopy` waits for bytes (from an `async`
    /// block): their messages follow that one, in order, once its bytes have all arrived.
    private var queuedDeliveries: [(data: Data, message: NWProtocolFramer.Message, isComplete: Bool)] = []
    private var inHandleInput = false
    /// `parseInput` refused input during this `handleInput` for the answers waiting below.
    private var stoppedForAnswers = false
    /// The last `runInput` stopped with input left for the answers waiting below: it runs again
    /// once they drain (even if they drain in the same pass, which asks for another), and the
    /// peer's end waits until it has.
    private var inputWaitsForAnswers = false
    /// `handleInput` is not called while `outputLimit` bytes written in answer to input wait
    /// for the layer below (the channel has stopped reading: `.awaitingDecision`).
    private(set) var inputHeldForOutput = false

    private struct PendingDelivery {
        var remaining: Int
        /// The record's header went up already: bytes go straight up as they arrive (else they
        /// join `partial`).
        let streaming: Bool
        let message: NWProtocolFramer.Message
        let isComplete: Bool
    }

    // MARK: Output state

    private var outputPassThrough = false
    private var recordHeader: [UInt8] = []
    private var recordType: UInt32 = 0
    private var recordRemaining = 0
    /// The content of the record being gathered, then of the message in `handleOutput`.
    private var outgoing: [UInt8] = []
    private var outgoingStart = 0
    private var inHandleOutput = false
    /// Bytes the framer wrote that the layer below has not taken.
    private var toInner: [UInt8] = []
    private var toInnerStart = 0
    /// Bytes ever added to `toInner`, and ever taken from it: the positions `answerRuns` use.
    private var toInnerWritten = 0
    private var toInnerTaken = 0
    /// Where in `toInner` (`toInnerWritten` positions) bytes written during `handleInput` lie.
    private var answerRuns = Deque<Range<Int>>()
    /// Bytes written in answer to input (during `handleInput`) the layer below has not taken.
    private(set) var pendingAnswerCount = 0

    // MARK: Off-loop requests

    private let requests = FramerRequests()

    /// `messages`: the connection's table, when known before attaching (else `share(with:)`
    /// hands it over).
    /// `inputLimit`: a smaller bound than `maximumBufferedInput`, for tests.
    /// `endHoldLimit`: how long the peer's end may wait behind held input (the connection's
    /// handshake timeout).
    init(
        definition: NWProtocolFramer.Definition, maximumMessageSize: Int, over inner: any ByteStreamLayer, messages: FramerMessages? = nil,
        inputLimit: Int = NWProtocolFramer.maximumBufferedInput, endHoldLimit: Duration = TLS().handshakeTimeout
    ) {
        self.inner = inner
        self.maximumMessageSize = maximumMessageSize
        self.messages = messages
        self.inputLimit = inputLimit
        self.endHoldLimit = endHoldLimit
        instance = NWProtocolFramer.Instance(definition: definition, layer: self)
        implementation = definition.implementation.init(framer: instance)
    }

    deinit {
        // A wakeup timer still set on the loop is cancelled; nothing else holds this layer.
        let (timers, loop) = requests.state.withLock { requests in
            defer {
                requests.wakeupTimer = nil
                requests.endHoldTimer = nil
                requests.wakeupGeneration += 1
            }
            return ([requests.wakeupTimer, requests.endHoldTimer].compactMap { $0 }, requests.loop)
        }
        if !timers.isEmpty, let loop { loop.execute { context in timers.forEach { context.deregister($0) } } }
    }

    func share(with part: ByteStreamShared) {
        messages = part.messageReceiver?.framerMessages
    }

    /// The loop the framer's wakeups are timed on.
    var eventLoop: EventLoop? {
        get { requests.state.withLock { $0.loop } }
        set {
            let unplaced = requests.state.withLock { requests in
                requests.loop = newValue
                defer { requests.unplacedWakeup = nil }
                return requests.unplacedWakeup
            }
            inner.eventLoop = newValue
            // A wakeup asked for before the layer had a loop: due as long after it was asked
            // for as it asked.
            guard let newValue, let (generation, deadline) = unplaced else { return }
            let requests = requests
            let place: @Sendable (LoopContext) -> Void = { context in
                let left = max(.zero, deadline - MonotonicInstant.now())
                requests.place(generation: generation, delay: left, context: context)
            }
            if let context = newValue.currentContext { place(context) } else { newValue.execute(place) }
        }
    }

    /// Also how a framer's `async` block or wakeup gets a pass on the loop.
    var requestProcessing: (@Sendable () -> Void)? {
        get { inner.requestProcessing }
        set {
            requests.state.withLock { $0.requestProcessing = newValue }
            // What the layer below waits on (a TLS verify block's verdict) wakes this one too.
            inner.requestProcessing = newValue
        }
    }

    // MARK: From below

    var bufferedInputCount: Int { inner.bufferedInputCount }

    /// Input bytes the framer has not consumed (what `maximumBufferedInput` bounds).
    var unconsumedInputCount: Int { input.count - inputStart }

    func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        try inner.withInputSpace(minimum: minimum, body)
    }

    func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        if let failure { throw failure }
        return try withoutActuallyEscaping(deliver) { deliver in
            deliverAbove = deliver
            defer { deliverAbove = nil }
            if !undelivered.isEmpty {
                undelivered.withUnsafeBytes { deliver($0) }
                undelivered.removeAll()
            }
            let below = try inner.process { bytes in received(bytes) }
            if below.contains(.becameReady) { innerReady = true }
            if innerReady && !started { start() }
            runRequests()
            try pushToInner()
            runInput()
            var events: ByteStreamLayerEvents = []
            if innerReady && framerReady && !reportedReady && failure == nil {
                reportedReady = true
                events.insert(.becameReady)
            }
            if below.contains(.peerFinished) { innerFinished = true }
            if below.contains(.awaitingDecision) { events.insert(.awaitingDecision) }
            try pushToInner()
            // Held input: no more reading until the answers drain (`pushToInner` then asks for
            // a pass, which reads again). The peer's end waits behind input left for the
            // answers (until a pass has run the framer over it), so the messages it still
            // holds are delivered before the stream ends.
            // Input left for the answers stops reading too, even when they drained in this
            // pass: the pass that asks for parses it first (else input read faster than the
            // bound lets it be parsed would pile up).
            if inputHeldForOutput || inputWaitsForAnswers { events.insert(.awaitingDecision) }
            if framerFinished || (innerFinished && !inputWaitsForAnswers && !holdsEnd()) { events.insert(.peerFinished) }
            if let failure { throw failure }
            return events
        }
    }

    private func start() {
        started = true
        switch implementation.start(framer: instance) {
        case .ready: framerReady = true
        case .willMarkReady: break
        }
    }

    /// Bytes from below: the rest of a pending delivery first, then the framer's input.
    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil else { return }
        var bytes = bytes
        if inputPassThrough && started && input.count == inputStart {
            deliverPassedThrough(bytes)
            return
        }
        if pendingDelivery != nil && input.count == inputStart {
            let taken = continueDelivery(with: bytes)
            bytes = UnsafeRawBufferPointer(rebasing: bytes[taken...])
        }
        input.append(contentsOf: bytes)
    }

    /// Feeds a pending delivery from `bytes`; returns how many it took.
    private func continueDelivery(with bytes: UnsafeRawBufferPointer) -> Int {
        guard var pending = pendingDelivery else { return 0 }
        let count = min(pending.remaining, bytes.count)
        let piece = UnsafeRawBufferPointer(rebasing: bytes[..<count])
        if pending.streaming {
            deliverBytes(piece)
        } else {
            partial?.bytes.append(contentsOf: piece)
        }
        pending.remaining -= count
        if pending.remaining == 0 {
            pendingDelivery = nil
            if !pending.streaming && pending.isComplete, let whole = partial {
                partial = nil
                whole.bytes.withUnsafeBytes { deliverRecord(message: whole.message, $0) }
            }
            deliverQueued()
        } else {
            pendingDelivery = pending
        }
        return count
    }

    /// Calls `handleInput` while it makes progress on buffered input.
    private func runInput() {
        guard started, failure == nil else { return }
        inputWaitsForAnswers = false
        if inputPassThrough {
            if input.count > inputStart {
                let rest = Array(input[inputStart...])
                input.removeAll()
                inputStart = 0
                rest.withUnsafeBytes { deliverPassedThrough($0) }
            }
            return
        }
        while failure == nil {
            if pendingDelivery != nil {
                guard input.count > inputStart else { break }
                let taken = input.withUnsafeBytes { continueDelivery(with: UnsafeRawBufferPointer(rebasing: $0[inputStart...])) }
                inputStart += taken
                if pendingDelivery != nil { break }
            }
            let available = input.count - inputStart
            guard available > 0, available >= inputWanted else { break }
            // What the framer wrote in answer to input and the peer has not read yet bounds
            // how much more input it parses (a peer that sends without reading gets stopped).
            if inputHeldForOutput || pendingAnswerCount >= Self.outputLimit {
                inputHeldForOutput = true
                inputWaitsForAnswers = true
                break
            }
            let before = inputStart
            inHandleInput = true
            stoppedForAnswers = false
            inputWanted = max(0, implementation.handleInput(framer: instance))
            inHandleInput = false
            if stoppedForAnswers {
                // What it asked for was refused for the answers, not missing: it is called
                // again as soon as they have drained.
                inputWanted = 0
                inputHeldForOutput = true
                inputWaitsForAnswers = true
                break
            }
            if inputStart == before && pendingDelivery == nil { break }
            if inputPassThrough { return runInput() }
        }
        if inputStart > 0 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
        if failure == nil && input.count >= inputLimit {
            fail(.messageTooLarge(size: input.count, maximum: inputLimit))
        }
    }

    /// TCP's FIN (TLS's layer below has checked it came after close_notify): the end waits
    /// behind input left for the answers or held by the framer, and comes from a later pass.
    func endOfInput() throws -> Bool {
        if let failure { throw failure }
        _ = try inner.endOfInput()
        innerFinished = true
        return inputWaitsForAnswers || holdsEnd()
    }

    /// Whether the peer's end waits behind the framer now: an `async` block is queued, or input
    /// is left unconsumed (or a message partly delivered) with a wakeup to come, and the bound
    /// has not passed. The first time, starts the bound's timer; past the bound with input
    /// still held, fails the connection.
    private func holdsEnd() -> Bool {
        guard started, failure == nil, !framerFinished else { return false }
        let holdsInput = input.count > inputStart || partial != nil
        let (blocksQueued, wakeupToCome, boundPassed) = requests.state.withLock { requests in
            (!requests.blocks.isEmpty, requests.wakeupTimer != nil || requests.dueWakeup != nil || requests.unplacedWakeup != nil, requests.endHoldPassed)
        }
        guard blocksQueued || (holdsInput && wakeupToCome) else { return false }
        if boundPassed {
            let held = input.count - inputStart + (partial?.bytes.count ?? 0)
            fail(.protocolError(
                code: 0,
                reason: "the framer \(instance.definition.name) held \(held) bytes of input for \(endHoldLimit) after the peer's end of stream without delivering them (a framer may hold the end for at most the connection's handshake timeout)",
                byPeer: false))
            return false
        }
        if !endHeld {
            endHeld = true
            requests.placeEndHold(after: endHoldLimit)
        }
        return true
    }

    // MARK: The instance's input calls

    func parseInput(minimum: Int, maximum: Int, parse: (UnsafeMutableRawBufferPointer?, Bool) -> Int) -> Bool {
        guard failure == nil, pendingDelivery == nil else { return false }
        // A `handleInput` that loops over all the input it has stops at the bound on answers
        // too: no more input is offered until half of them has gone below.
        if inHandleInput && pendingAnswerCount >= Self.outputLimit {
            stoppedForAnswers = true
            return false
        }
        if minimum > inputLimit {
            fail(.messageTooLarge(size: minimum, maximum: inputLimit))
            return false
        }
        let available = input.count - inputStart
        guard available >= max(0, minimum) else { return false }
        let count = min(available, max(0, maximum))
        let start = inputStart
        let consumed = input.withUnsafeMutableBytes { storage in
            parse(count == 0 ? nil : UnsafeMutableRawBufferPointer(rebasing: storage[start ..< start + count]), false)
        }
        inputStart += min(max(0, consumed), count)
        return true
    }

    func deliverInput(_ data: Data, message: NWProtocolFramer.Message, isComplete: Bool) {
        guard failure == nil else { return }
        // The message a `deliverInputNoCopy` started has bytes to come: this one follows it.
        if pendingDelivery != nil {
            queuedDeliveries.append((data, message, isComplete))
            return
        }
        if partial == nil && isComplete {
            guard checkSize(data.count) else { return }
            data.withUnsafeBytes { deliverRecord(message: message, $0) }
            return
        }
        guard checkSize((partial?.bytes.count ?? 0) + data.count) else { return }
        var whole = partial ?? (message, [])
        whole.bytes.append(contentsOf: data)
        partial = nil
        if isComplete {
            whole.bytes.withUnsafeBytes { deliverRecord(message: whole.message, $0) }
        } else {
            partial = whole
        }
    }

    func deliverInputNoCopy(length: Int, message: NWProtocolFramer.Message, isComplete: Bool) -> Bool {
        guard failure == nil, pendingDelivery == nil, length >= 0 else { return false }
        let total = (partial?.bytes.count ?? 0) + length
        guard checkSize(total) else { return false }
        let available = input.count - inputStart
        // A datagram's message cannot take bytes from the next datagram: one that runs past
        // its datagram's end is dropped with the rest of the datagram.
        if datagramMode && available < length {
            inputStart = input.count
            return false
        }
        if partial == nil && isComplete {
            let now = min(available, length)
            deliverHeader(message: message, length: length)
            input.withUnsafeBytes { deliverBytes(UnsafeRawBufferPointer(rebasing: $0[inputStart ..< inputStart + now])) }
            inputStart += now
            guard now < length else { return true }
            pendingDelivery = PendingDelivery(remaining: length - now, streaming: true, message: message, isComplete: true)
            return false
        }
        if partial == nil { partial = (message, []) }
        let now = min(available, length)
        partial!.bytes.append(contentsOf: input[inputStart ..< inputStart + now])
        inputStart += now
        guard now < length else {
            if isComplete, let whole = partial {
                partial = nil
                whole.bytes.withUnsafeBytes { deliverRecord(message: whole.message, $0) }
            }
            return true
        }
        pendingDelivery = PendingDelivery(remaining: length - now, streaming: false, message: message, isComplete: isComplete)
        return false
    }

    /// The deliveries queued behind a `deliverInputNoCopy` whose bytes have now all arrived.
    private func deliverQueued() {
        guard !queuedDeliveries.isEmpty else { return }
        let queued = queuedDeliveries
        queuedDeliveries.removeAll()
        for delivery in queued where failure == nil {
            deliverInput(delivery.data, message: delivery.message, isComplete: delivery.isComplete)
        }
    }

    func passThroughInput() {
        inputPassThrough = true
    }

    /// Over datagrams, after the framer has run over one: what it left of it (unconsumed
    /// bytes, a message delivered in part) is dropped, as the datagram's end.
    func endDatagram() {
        input.removeAll(keepingCapacity: true)
        inputStart = 0
        inputWanted = 0
        partial = nil
    }

    /// Input passed through: each run as messages of at most the maximum size.
    private func deliverPassedThrough(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count && failure == nil {
            guard checkSize(maximumMessageSize == 0 ? bytes.count : 0) else { return }
            let count = min(bytes.count - offset, maximumMessageSize)
            deliverRecord(message: NWProtocolFramer.Message(instance: instance), UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + count]))
            offset += count
        }
    }

    /// Whether a message of `size` bytes may be delivered; fails the connection if not.
    private func checkSize(_ size: Int) -> Bool {
        guard size <= maximumMessageSize else {
            fail(.messageTooLarge(size: size, maximum: maximumMessageSize))
            return false
        }
        return true
    }

    private func deliverRecord(message: NWProtocolFramer.Message, _ bytes: UnsafeRawBufferPointer) {
        deliverHeader(message: message, length: bytes.count)
        deliverBytes(bytes)
    }

    private func deliverHeader(message: NWProtocolFramer.Message, length: Int) {
        let type = messages?.registerInbound(message) ?? 0
        let length = UInt32(length)
        let header: [UInt8] = [
            UInt8(type >> 24), UInt8((type >> 16) & 0xFF), UInt8((type >> 8) & 0xFF), UInt8(type & 0xFF),
            UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF),
        ]
        header.withUnsafeBytes { deliverBytes($0) }
    }

    private func deliverBytes(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        if let deliverAbove {
            deliverAbove(bytes)
        } else {
            undelivered.append(contentsOf: bytes)
            requestPass()
        }
    }

    // MARK: From above

    var sendsEarlyData: Bool { false }

    func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int { 0 }

    /// Takes records from above, gathering each whole before the framer writes it; takes none
    /// while `outputLimit` bytes wait for the layer below.
    func send(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        if let failure { throw failure }
        try pushToInner()
        var taken = 0
        while taken < bytes.count, pendingToInner < Self.outputLimit {
            if recordRemaining == 0 && recordHeader.count < Self.recordHeaderSize {
                recordHeader.append(bytes[taken])
                taken += 1
                if recordHeader.count == Self.recordHeaderSize { beginRecord() }
                continue
            }
            let count = min(bytes.count - taken, recordRemaining)
            outgoing.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[taken ..< taken + count]))
            taken += count
            recordRemaining -= count
            if recordRemaining == 0 { finishRecord() }
        }
        try pushToInner()
        if let failure { throw failure }
        return taken
    }

    private func beginRecord() {
        recordType = recordHeader[0 ..< 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        recordRemaining = recordHeader[4 ..< 8].reduce(0) { $0 << 8 | Int($1) }
        outgoing.removeAll(keepingCapacity: true)
        outgoing.reserveCapacity(recordRemaining)
        if recordRemaining == 0 { finishRecord() }
    }

    /// A whole message from above: the framer writes it (or, passing output through, it goes
    /// below as it is).
    private func finishRecord() {
        recordHeader.removeAll(keepingCapacity: true)
        let message = messages?.takeOutbound(recordType & ~FramerMessages.incompleteBit) ?? NWProtocolFramer.Message(instance: instance)
        guard failure == nil else { return }
        if outputPassThrough {
            appendToInner(outgoing)
        } else {
            outgoingStart = 0
            inHandleOutput = true
            implementation.handleOutput(
                framer: instance, message: message, messageLength: outgoing.count,
                isComplete: recordType & FramerMessages.incompleteBit == 0)
            inHandleOutput = false
        }
        outgoing.removeAll(keepingCapacity: outgoing.capacity <= 64 * 1024)
        outgoingStart = 0
    }

    func seal() throws {
        if let failure { throw failure }
        try pushToInner()
    }

    var heldByteCount: Int { pendingToInner + outgoing.count + inner.heldByteCount }

    /// Stops the framer (`stop`, then `cleanup`) and ends the stream below.
    func close() {
        if started && !cleanedUp {
            cleanedUp = true
            _ = implementation.stop(framer: instance)
            implementation.cleanup(framer: instance)
            scheduleWakeup(.forever)
        }
        do { try pushToInner() } catch { fail(NetworkError(error)) }
        inner.close()
    }

    var isClosed: Bool { inner.isClosed }

    // MARK: The instance's output calls

    func parseOutput(minimum: Int, maximum: Int, parse: (UnsafeMutableRawBufferPointer?, Bool) -> Int) -> Bool {
        guard inHandleOutput else { return false }
        let available = outgoing.count - outgoingStart
        guard available >= max(0, minimum) else { return false }
        let count = min(available, max(0, maximum))
        let start = outgoingStart
        let skipped = outgoing.withUnsafeMutableBytes { storage in
            parse(count == 0 ? nil : UnsafeMutableRawBufferPointer(rebasing: storage[start ..< start + count]), true)
        }
        outgoingStart += min(max(0, skipped), count)
        return true
    }

    func writeOutput(_ data: some DataProtocol) {
        guard failure == nil else { return }
        appendToInner(data)
        // Outside a pass (none is running when `deliverAbove` is nil), the layer needs one.
        if !inHandleOutput && deliverAbove == nil { requestPass() }
    }

    func writeOutputNoCopy(length: Int) throws {
        guard inHandleOutput else { throw NetworkError.invalidState("writeOutputNoCopy(length:) outside handleOutput") }
        let available = outgoing.count - outgoingStart
        guard length >= 0, length <= available else {
            throw NetworkError.invalidState("writeOutputNoCopy(length: \(length)) with \(available) bytes of the message left")
        }
        appendToInner(outgoing[outgoingStart ..< outgoingStart + length])
        outgoingStart += length
    }

    func passThroughOutput() {
        outputPassThrough = true
    }

    // MARK: The instance's state calls

    func markReady() {
        guard !framerReady else { return }
        framerReady = true
        requestPass()
    }

    func markFailed(_ error: NWError?) {
        guard let error else {
            framerFinished = true
            requestPass()
            return
        }
        fail(NetworkError(framerError: error))
    }

    /// Sets the framer's one wakeup on the loop's timers (replacing the one set before; `.forever`
    /// cancels it). May be called from any thread: on the loop the timer is placed at once,
    /// from elsewhere by work posted to the loop, in call order; when it fires the wakeup runs
    /// in the pass it asks for. A wakeup asked for before the layer is on a channel's loop is
    /// kept, and placed when it gets there (due as many milliseconds after it was asked for).
    func scheduleWakeup(_ time: NWProtocolFramer.Instance.WakeupTime) {
        let delay: Duration? = if case .milliseconds(let milliseconds) = time { .milliseconds(Int64(min(milliseconds, UInt64(Int32.max)))) } else { nil }
        let (generation, loop) = requests.state.withLock { requests in
            requests.wakeupGeneration += 1
            requests.dueWakeup = nil
            requests.unplacedWakeup = nil
            if requests.loop == nil, let delay {
                requests.unplacedWakeup = (requests.wakeupGeneration, MonotonicInstant.now() + delay)
            }
            return (requests.wakeupGeneration, requests.loop)
        }
        guard let loop else { return }
        let requests = requests
        if let context = loop.currentContext {
            requests.place(generation: generation, delay: delay, context: context)
        } else {
            loop.execute { requests.place(generation: generation, delay: delay, context: $0) }
        }
    }

    /// Whether a wakeup's timer is set on the loop now.
    var hasWakeupTimer: Bool { requests.hasWakeupTimer }

    func enqueue(_ block: @escaping @Sendable () -> Void) {
        let wake = requests.state.withLock { requests in
            requests.blocks.append(block)
            return requests.requestProcessing
        }
        wake?()
    }

    /// Runs the blocks given to `async` and a wakeup that came due, on the loop.
    private func runRequests() {
        guard started else { return }
        let (blocks, wakeup) = requests.state.withLock { requests in
            let blocks = requests.blocks
            requests.blocks.removeAll()
            let due = requests.dueWakeup != nil && requests.dueWakeup == requests.wakeupGeneration
            requests.dueWakeup = nil
            return (blocks, due)
        }
        for block in blocks where failure == nil { block() }
        if wakeup && failure == nil { implementation.wakeup(framer: instance) }
    }

    /// Asks the channel for a pass on the loop (a call made outside `process`).
    private func requestPass() {
        requests.state.withLock { $0.requestProcessing }?()
    }

    private func fail(_ error: NetworkError) {
        if failure == nil { failure = error }
    }

    // MARK: To below

    private var pendingToInner: Int { toInner.count - toInnerStart }

    var pendingOutputCount: Int {
        if inner.pendingOutputCount == 0 && pendingToInner > 0 {
            do { try pushToInner() } catch { fail(NetworkError(error)) }
        }
        return inner.pendingOutputCount
    }

    func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        let written = try inner.withPendingOutput(body)
        do { try pushToInner() } catch { fail(NetworkError(error)) }
        return written
    }

    /// Queues bytes the framer wrote for the layer below, noting those written in answer to
    /// input.
    private func appendToInner<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
        let start = toInnerWritten, before = toInner.count
        toInner.append(contentsOf: bytes)
        toInnerWritten += toInner.count - before
        guard inHandleInput, toInnerWritten > start else { return }
        pendingAnswerCount += toInnerWritten - start
        if let last = answerRuns.last, last.upperBound == start {
            answerRuns[answerRuns.index(before: answerRuns.endIndex)] = last.lowerBound ..< toInnerWritten
        } else {
            answerRuns.append(start ..< toInnerWritten)
        }
    }

    /// `taken` bytes of `toInner` went below: the answers among them no longer count, and held
    /// input is released once half the answers' bound has drained.
    private func noteTaken(_ taken: Int) {
        toInnerTaken += taken
        while let first = answerRuns.first, first.lowerBound < toInnerTaken {
            let drained = min(first.upperBound, toInnerTaken) - first.lowerBound
            pendingAnswerCount -= drained
            if first.upperBound <= toInnerTaken {
                answerRuns.removeFirst()
            } else {
                answerRuns[answerRuns.startIndex] = toInnerTaken ..< first.upperBound
            }
        }
        if inputHeldForOutput && pendingAnswerCount < Self.outputLimit / 2 {
            inputHeldForOutput = false
            requestPass()
        }
    }

    /// Hands what the framer wrote to the layer below, as much as it takes, once it is ready.
    private func pushToInner() throws {
        guard innerReady, pendingToInner > 0, !inner.isClosed else { return }
        let taken = try toInner.withUnsafeBytes { try inner.send(UnsafeRawBufferPointer(rebasing: $0[toInnerStart...])) }
        toInnerStart += taken
        noteTaken(taken)
        if toInnerStart == toInner.count {
            toInner.removeAll(keepingCapacity: toInner.capacity <= 2 * Self.outputLimit)
            toInnerStart = 0
        } else if toInnerStart >= Self.outputLimit {
            toInner.removeFirst(toInnerStart)
            toInnerStart = 0
        }
        if taken > 0 { try inner.seal() }
    }

    // MARK: Facts

    var negotiatedALPN: String? { inner.negotiatedALPN }
    var isResumed: Bool { inner.isResumed }
    var earlyDataAccepted: Bool { inner.earlyDataAccepted }
    var securityFacts: SecurityFacts? { inner.securityFacts }
}

/// What reaches a framer layer from other threads: blocks given to `async(execute:)`, the
/// wakeup asked for, and the channel's way back to the loop.
final class FramerRequests: Sendable {
    struct State {
        var blocks: [@Sendable () -> Void] = []
        /// Each `scheduleWakeup` starts a generation; only the latest one's timer counts.
        var wakeupGeneration: UInt64 = 0
        var dueWakeup: UInt64?
        var requestProcessing: (@Sendable () -> Void)?
        /// The loop whose timers carry the wakeups, and the timer set there (used on the loop).
        var loop: EventLoop?
        var wakeupTimer: UInt64?
        /// A wakeup asked for while `loop` was nil: its generation and when it is due (on the
        /// process's monotonic clock).
        var unplacedWakeup: (generation: UInt64, deadline: MonotonicInstant)?
        /// The timer bounding how long the peer's end waits behind held input, and whether it
        /// has fired.
        var endHoldTimer: UInt64?
        var endHoldPassed = false
    }

    let state = Locked(State())

    /// On the loop: replaces the timer set before with one `delay` from now (none for nil),
    /// unless a later `scheduleWakeup` replaced the wakeup of `generation` (its own placing,
    /// queued behind or done already, cancels the timer set before).
    func place(generation: UInt64, delay: Duration?, context: LoopContext) {
        let earlier: UInt64?? = state.withLock { requests in
            guard requests.wakeupGeneration == generation else { return nil }
            defer { requests.wakeupTimer = nil }
            return .some(requests.wakeupTimer)
        }
        guard let earlier else { return }
        if let earlier { context.deregister(earlier) }
        guard let delay else { return }
        let timer = context.schedule(at: context.now + delay) { [self] _ in
            let wake = state.withLock { requests -> (@Sendable () -> Void)? in
                guard requests.wakeupGeneration == generation else { return nil }
                requests.wakeupTimer = nil
                requests.dueWakeup = generation
                return requests.requestProcessing
            }
            wake?()
        }
        state.withLock { $0.wakeupTimer = timer }
    }

    /// Whether a wakeup's timer is set on the loop now.
    var hasWakeupTimer: Bool { state.withLock { $0.wakeupTimer != nil } }

    /// On the loop: sets the bound on how long the peer's end waits behind held input; when it
    /// fires, a pass checks whether the input is still held.
    func placeEndHold(after delay: Duration) {
        guard let context = state.withLock({ $0.loop })?.currentContext else {
            // Not on a loop (a layer driven by hand): no bound to time.
            return
        }
        let timer = context.schedule(at: context.now + delay) { [self] _ in
            let wake = state.withLock { requests -> (@Sendable () -> Void)? in
                requests.endHoldTimer = nil
                requests.endHoldPassed = true
                return requests.requestProcessing
            }
            wake?()
        }
        state.withLock { $0.endHoldTimer = timer }
    }
}
