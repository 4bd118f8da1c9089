import Foundation
import Testing

@testable import Braid
import BraidCore
import BraidIO
import BraidWebSocketIO

/// The framer layer's bounds and ordering under its own calls: output written in answer to
/// input stops the input of a peer that does not read (over loopback TCP), a delivery from an
/// `async` block waits behind a streamed message, and wakeups run on the loop's timers.
@Suite(.timeLimit(.minutes(5))) struct FramerLayerTests {
    // MARK: Answers to a peer that does not read

    /// A raw TCP peer sends at least 16 MiB to a framer that answers each 1 KiB block with
    /// 2 KiB, and reads nothing: the framer's layer stops parsing (and the channel reading) once
    /// 64 KiB of answers wait, so it never holds more than that before a `handleInput`; once the
    /// peer reads, every answer arrives in order and all of the input is parsed. The answers
    /// must outgrow what the kernel can buffer between the two (the server's send buffer and
    /// the peer's receive buffer, which autotuning grows up to `tcp_rmem`'s maximum) and the
    /// channels' own buffers; else all of them fit and nothing is held.
    @Test func aPeerThatSendsWithoutReadingIsStoppedByTheBoundOnAnswers() async throws {
        let buffered = Self.largestKernelBuffer("tcp_rmem") + Self.largestKernelBuffer("tcp_wmem") + (8 << 20)
        let blocks = max(16 * 1024, buffered / (2 * AnsweringFramer.blockSize) + 1024)
        try await Self.sendWithoutReading(blocks, to: AnsweringFramer.self) {
            let state = AnsweringFramer.state.withLock { $0 }
            #expect(state.largestPendingAtEntry < FramerLayer.outputLimit)
            #expect(state.consumed < blocks * AnsweringFramer.blockSize)
        }
        let final = AnsweringFramer.state.withLock { $0 }
        #expect(final.consumed == blocks * AnsweringFramer.blockSize)
        #expect(final.largestPendingAtEntry < FramerLayer.outputLimit)
    }

    /// A framer whose one `handleInput` parses every request it has (8 bytes each) and answers
    /// each with 512 bytes, against a raw TCP peer that sends 512 KiB of requests and reads
    /// nothing: `parseInput` offers no more input once 64 KiB of answers wait, inside that one
    /// call too, so the answers waiting never pass the bound by more than one answer; once the
    /// peer reads, every answer arrives in order.
    @Test func aHandleInputThatLoopsOverAllItsInputStopsAtTheBoundOnAnswers() async throws {
        let requests = 64 * 1024
        try await Self.sendWithoutReading(requests, to: LoopingAnsweringFramer.self) {
            let largest = LoopingAnsweringFramer.state.withLock { $0.largestPending }
            #expect(largest <= FramerLayer.outputLimit + LoopingAnsweringFramer.answerSize, "\(largest) bytes of answers waited")
        }
        let final = LoopingAnsweringFramer.state.withLock { $0 }
        #expect(final.answered == requests)
        #expect(final.largestPending <= FramerLayer.outputLimit + LoopingAnsweringFramer.answerSize)
    }

    /// The largest buffer `net.ipv4.<name>` lets a TCP socket grow to (its third field), or
    /// 6 MiB (Linux's usual largest) if it cannot be read.
    static func largestKernelBuffer(_ name: String) -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/\(name)", encoding: .utf8)) ?? ""
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        return fields.count == 3 ? Int(fields[2]) ?? 6 << 20 : 6 << 20
    }

    /// A raw TCP peer sends `count` inputs of `F` (in 64 KiB sends) to a listener running `F`
    /// over TCP and reads none of the answers, until the server's framer layer holds its input
    /// back (`whileHeld` then checks the framer's state); then the peer reads every answer and
    /// checks each, in order, and all its sends complete.
    static func sendWithoutReading<F: AnswerBoundFramer & SendableMetatype>(_ count: Int, to framer: F.Type, whileHeld: () -> Void) async throws {
        F.reset()
        let server = try await RunningFramedListener.start(Framer<F> { TCP() }) { connection in
            // The application reads nothing either: the framer delivers no messages.
            _ = try? await connection.receive()
        }
        defer { server.task.cancel() }
        let peer = NetworkConnection(to: server.endpoint) { TCP() }
        defer { peer.cancel() }
        let sending = Task {
            var chunk = Data()
            for index in 0 ..< count {
                chunk.append(F.input(index))
                if chunk.count >= 64 * 1024 {
                    try await peer.send(chunk)
                    chunk.removeAll(keepingCapacity: true)
                }
            }
            if !chunk.isEmpty { try await peer.send(chunk) }
        }
        // Until the server holds the input (or, were it unbounded, has parsed all of it).
        let held = try await withDeadline(.seconds(240)) {
            while true {
                if F.parsedCount == count { return false }
                if await F.serverHoldsInput() { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(held == true, "the server parsed all \(count) inputs while the peer read none of its answers")
        whileHeld()

        // The peer reads: every answer, in order.
        var buffered = Data()
        var next = 0
        while next < count {
            buffered.append(try await peer.receive(atLeast: 1, atMost: 1 << 20).content)
            var offset = buffered.startIndex
            while next < count, case let expected = F.answer(next), buffered.endIndex - offset >= expected.count {
                guard buffered[offset ..< offset + expected.count] == expected else {
                    Issue.record("the answer to input \(next) differs")
                    return
                }
                offset += expected.count
                next += 1
            }
            buffered = Data(buffered[offset...])
        }
        try await sending.value
    }

    // MARK: A delivery behind a streamed message

    /// A message delivered with `deliverInputNoCopy` before its bytes have all arrived is
    /// streamed (its record's header goes up at once); a `deliverInput` from an `async` block
    /// meanwhile comes after it, whole, not inside it.
    @Test func aDeliveryFromAnAsyncBlockFollowsAStreamedMessage() throws {
        let layer = FramerLayer(definition: StreamingFramer.definition, maximumMessageSize: 1024, over: PlainByteStreamLayer(), messages: FramerMessages())
        var above: [UInt8] = []
        func feed(_ bytes: [UInt8]) throws {
            if !bytes.isEmpty {
                _ = layer.withInputSpace(minimum: bytes.count) { space in
                    bytes.withUnsafeBytes { space.copyMemory(from: $0) }
                    return bytes.count
                }
            }
            _ = try layer.process { above.append(contentsOf: $0) }
        }
        // Ten bytes announced, four arrive: the framer streams the message and asks for an
        // `async` delivery, which runs on the next pass while six bytes are still to come.
        try feed([10, 1, 2, 3, 4])
        try feed([])
        try feed([5, 6, 7, 8, 9, 10])
        let records = try Self.records(above)
        #expect(records.map(\.value) == [Array(1 ... 10), Array("from async".utf8)])
    }

    /// The TLV records a framer layer delivered above it: type and length (UInt32 each, big
    /// endian), then the value.
    static func records(_ bytes: [UInt8]) throws -> [(type: UInt32, value: [UInt8])] {
        var records: [(type: UInt32, value: [UInt8])] = []
        var offset = 0
        while offset < bytes.count {
            try #require(bytes.count - offset >= 8, "a record header cut short")
            let field = { (at: Int) in bytes[at ..< at + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            let type = field(offset), length = Int(field(offset + 4))
            try #require(bytes.count - offset - 8 >= length, "a record cut short")
            records.append((type, Array(bytes[offset + 8 ..< offset + 8 + length])))
            offset += 8 + length
        }
        return records
    }

    // MARK: Wakeups on the loop

    /// Wakeups run on the channel's loop timers, on the loop's clock (virtual here): one set
    /// for 5 ms and cancelled off the loop never runs, one set for 20 ms runs once, at 20 ms,
    /// on the loop.
    @Test func wakeupsRunOnTheLoopsTimers() throws {
        let loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
        defer { loop.shutdown() }
        WakeupCountingFramer.reset()
        let (socket, peer) = MemoryStreamNetwork.pair(capacity: 4096)
        defer { withExtendedLifetime(peer) {} }
        let channel = ByteStreamChannel(loop: loop, sendLimit: 64 * 1024, receiveLimit: 64 * 1024, handshakeTimeout: .seconds(5), describe: { $0 })
        let layer = FramerLayer(definition: WakeupCountingFramer.definition, maximumMessageSize: 1024, over: PlainByteStreamLayer(), messages: FramerMessages())
        let instance = try #require(layer.instance)
        let parts = OnTheTestThread(value: (channel, layer, socket))
        loop.execute { context in parts.value.0.attach(socket: parts.value.2, layer: parts.value.1, context: context) }
        loop.runPending()
        #expect(channel.isReady)
        // `start` asked for a wakeup in 5 ms; cancelled and replaced from this thread, which is
        // not the loop's while it is not driving it.
        #expect(!loop.inEventLoop)
        instance.scheduleWakeup(wakeupTime: .forever)
        instance.scheduleWakeup(wakeupTime: .milliseconds(20))
        loop.advance(by: .milliseconds(19))
        #expect(WakeupCountingFramer.state.withLock { $0 } == .init(wakeups: 0, onTheLoop: 0))
        loop.advance(by: .milliseconds(2))
        #expect(WakeupCountingFramer.state.withLock { $0 } == .init(wakeups: 1, onTheLoop: 1))
        loop.advance(by: .seconds(1))
        #expect(WakeupCountingFramer.state.withLock { $0 } == .init(wakeups: 1, onTheLoop: 1))
    }

    /// A wakeup asked for on the loop is set (or cancelled) at once, not by work posted for
    /// later: within one piece of loop work, `.forever` leaves no timer and a new time sets one;
    /// it then comes once, on time.
    @Test func aWakeupAskedForOnTheLoopIsSetAtOnce() throws {
        let loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
        defer { loop.shutdown() }
        WakeupCountingFramer.reset()
        let (channel, layer, peer) = try Self.attached(WakeupCountingFramer.definition, on: loop)
        defer { withExtendedLifetime((channel, peer)) {} }
        let instance = try #require(layer.instance)
        // `start` set a wakeup in 5 ms, on the loop.
        #expect(layer.hasWakeupTimer)
        let seen = SharedSlot<[Bool]>()
        let parts = OnTheTestThread(value: (instance, layer))
        loop.execute { _ in
            parts.value.0.scheduleWakeup(wakeupTime: .forever)
            let cancelled = !parts.value.1.hasWakeupTimer
            parts.value.0.scheduleWakeup(wakeupTime: .milliseconds(20))
            seen.value = [cancelled, parts.value.1.hasWakeupTimer]
        }
        loop.runPending()
        let observed = try #require(seen.value)
        #expect(observed[0], "the wakeup set before was still on the loop's timers after .forever")
        #expect(observed[1], "no timer was set for the new wakeup")
        loop.advance(by: .milliseconds(19))
        #expect(WakeupCountingFramer.state.withLock { $0 } == .init(wakeups: 0, onTheLoop: 0))
        loop.advance(by: .milliseconds(2))
        #expect(WakeupCountingFramer.state.withLock { $0 } == .init(wakeups: 1, onTheLoop: 1))
    }

    /// A wakeup a framer asks for in `init(framer:)`, before its layer is on a loop, is kept
    /// and comes once the connection runs the framer, a second after it was asked for.
    @Test func aWakeupAskedForBeforeTheLoopComesOnceOnIt() throws {
        let loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
        defer { loop.shutdown() }
        EarlyWakeupFramer.reset()
        let (channel, layer, peer) = try Self.attached(EarlyWakeupFramer.definition, on: loop)
        defer { withExtendedLifetime((channel, layer, peer)) {} }
        loop.advance(by: .milliseconds(500))
        #expect(EarlyWakeupFramer.wakeups.withLock { $0 } == 0)
        loop.advance(by: .milliseconds(600))
        #expect(EarlyWakeupFramer.wakeups.withLock { $0 } == 1)
        loop.advance(by: .seconds(5))
        #expect(EarlyWakeupFramer.wakeups.withLock { $0 } == 1)
    }

    /// A framer layer of `definition` over an in-memory socket, attached to a channel on the
    /// virtual `loop` (ready).
    static func attached(
        _ definition: NWProtocolFramer.Definition, on loop: EventLoop
    ) throws -> (channel: ByteStreamChannel, layer: FramerLayer, peer: AnyObject) {
        let (socket, peer) = MemoryStreamNetwork.pair(capacity: 4096)
        let channel = ByteStreamChannel(loop: loop, sendLimit: 64 * 1024, receiveLimit: 64 * 1024, handshakeTimeout: .seconds(5), describe: { $0 })
        let layer = FramerLayer(definition: definition, maximumMessageSize: 1024, over: PlainByteStreamLayer(), messages: FramerMessages())
        let parts = OnTheTestThread(value: (channel, layer, socket))
        loop.execute { context in parts.value.0.attach(socket: parts.value.2, layer: parts.value.1, context: context) }
        loop.runPending()
        #expect(channel.isReady)
        return (channel, layer, peer)
    }
}

/// Lets a test hand loop-confined state to a virtual loop it drives itself on this thread.
private struct OnTheTestThread<Value>: @unchecked Sendable {
    let value: Value
}

/// A framer that answers each input of its own with an answer of its own, for a peer that
/// sends without reading.
protocol AnswerBoundFramer: NWProtocolFramerImplementation, FramerProtocol {
    static func reset()
    /// Input `index` the peer sends, and the framer's answer to it.
    static func input(_ index: Int) -> Data
    static func answer(_ index: Int) -> Data
    /// Inputs parsed so far.
    static var parsedCount: Int { get }
    /// The server's framer, once made.
    static var instance: NWProtocolFramer.Instance? { get }
}

extension AnswerBoundFramer {
    /// Whether the server's framer layer holds its input back now (asked on its loop).
    static func serverHoldsInput() async -> Bool {
        guard let instance else { return false }
        return await withCheckedContinuation { continuation in
            instance.async { continuation.resume(returning: instance.layer?.inputHeldForOutput ?? false) }
        }
    }
}

/// Answers each 1 KiB block of input with the block twice, and notes how much of its answers
/// waited below it each time `handleInput` was called.
final class AnsweringFramer: AnswerBoundFramer {
    static let definition = NWProtocolFramer.Definition(implementation: AnsweringFramer.self)
    static var label: String { "Answering" }
    static let blockSize = 1024

    struct State {
        var instance: NWProtocolFramer.Instance?
        var consumed = 0
        var largestPendingAtEntry = 0
    }

    static let state = Locked(State())

    static func reset() {
        state.withLock { $0 = State() }
    }

    /// Block `index` of the peer's input: its number, then a byte that depends on it.
    static func block(_ index: Int) -> Data {
        var block = Data(repeating: UInt8(truncatingIfNeeded: index &* 7 &+ 1), count: blockSize)
        withUnsafeBytes(of: UInt32(index).bigEndian) { block.replaceSubrange(0 ..< 4, with: $0) }
        return block
    }

    static func input(_ index: Int) -> Data { block(index) }
    static func answer(_ index: Int) -> Data { block(index) + block(index) }
    static var parsedCount: Int { state.withLock { $0.consumed } / blockSize }
    static var instance: NWProtocolFramer.Instance? { state.withLock { $0.instance } }

    required init(framer: NWProtocolFramer.Instance) {
        Self.state.withLock { $0.instance = framer }
    }

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        let pending = framer.layer?.pendingAnswerCount ?? 0
        Self.state.withLock { $0.largestPendingAtEntry = max($0.largestPendingAtEntry, pending) }
        while true {
            var block: Data?
            _ = framer.parseInput(minimumIncompleteLength: Self.blockSize, maximumLength: Self.blockSize) { buffer, _ in
                guard let buffer, buffer.count == Self.blockSize else { return 0 }
                block = Data(buffer)
                return Self.blockSize
            }
            guard let block else { return Self.blockSize }
            framer.writeOutput(data: block)
            framer.writeOutput(data: block)
            Self.state.withLock { $0.consumed += Self.blockSize }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// A one-byte length, then the message, delivered with `deliverInputNoCopy` (streamed when it
/// has not all arrived); the first time, it also asks for a `deliverInput` from an `async`
/// block.
final class StreamingFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: StreamingFramer.self)
    static var label: String { "Streaming" }
    private var askedForAsync = false

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var length: Int?
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { buffer, _ in
                length = buffer.map { Int($0[0]) }
                return length == nil ? 0 : 1
            }
            guard let length else { return 1 }
            if !askedForAsync {
                askedForAsync = true
                framer.async {
                    framer.deliverInput(data: Data("from async".utf8), message: NWProtocolFramer.Message(instance: framer), isComplete: true)
                }
            }
            if !framer.deliverInputNoCopy(length: length, message: NWProtocolFramer.Message(instance: framer), isComplete: true) {
                return 0
            }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Asks for a wakeup in 5 ms when it starts; counts its wakeups, and those that ran on the
/// connection's loop.
final class WakeupCountingFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: WakeupCountingFramer.self)
    static var label: String { "WakeupCounting" }
    struct Counts: Equatable {
        var wakeups = 0
        var onTheLoop = 0
    }

    static let state = Locked(Counts())

    static func reset() {
        state.withLock { $0 = Counts() }
    }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult {
        framer.scheduleWakeup(wakeupTime: .milliseconds(5))
        return .ready
    }

    func wakeup(framer: NWProtocolFramer.Instance) {
        let onLoop = framer.layer?.eventLoop?.inEventLoop ?? false
        Self.state.withLock {
            $0.wakeups += 1
            if onLoop { $0.onTheLoop += 1 }
        }
    }

    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}
    func handleInput(framer: NWProtocolFramer.Instance) -> Int { 0 }
    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Parses every 8-byte request it has in one `handleInput` and answers each with 512 bytes;
/// notes the most answers that waited below after any answer.
final class LoopingAnsweringFramer: AnswerBoundFramer {
    static let definition = NWProtocolFramer.Definition(implementation: LoopingAnsweringFramer.self)
    static var label: String { "LoopingAnswering" }
    static let requestSize = 8
    static let answerSize = 512

    struct State {
        var instance: NWProtocolFramer.Instance?
        var answered = 0
        var largestPending = 0
    }

    static let state = Locked(State())

    static func reset() {
        state.withLock { $0 = State() }
    }

    /// Request `index`: its number, then four bytes that depend on it.
    static func request(_ index: Int) -> Data {
        var request = Data(repeating: UInt8(truncatingIfNeeded: index &* 13 &+ 3), count: requestSize)
        withUnsafeBytes(of: UInt32(index).bigEndian) { request.replaceSubrange(0 ..< 4, with: $0) }
        return request
    }

    /// The answer to request `index`: the request, then bytes that depend on it.
    static func answer(_ index: Int) -> Data {
        request(index) + Data(repeating: UInt8(truncatingIfNeeded: index &* 5 &+ 1), count: answerSize - requestSize)
    }

    static func input(_ index: Int) -> Data { request(index) }
    static var parsedCount: Int { state.withLock { $0.answered } }
    static var instance: NWProtocolFramer.Instance? { state.withLock { $0.instance } }

    required init(framer: NWProtocolFramer.Instance) {
        Self.state.withLock { $0.instance = framer }
    }

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        while true {
            var index: Int?
            _ = framer.parseInput(minimumIncompleteLength: Self.requestSize, maximumLength: Self.requestSize) { buffer, _ in
                guard let buffer, buffer.count == Self.requestSize else { return 0 }
                index = Int(buffer[0 ..< 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                return Self.requestSize
            }
            guard let index else { return Self.requestSize }
            framer.writeOutput(data: Self.answer(index))
            let pending = framer.layer?.pendingAnswerCount ?? 0
            Self.state.withLock {
                $0.answered += 1
                $0.largestPending = max($0.largestPending, pending)
            }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Asks for a wakeup in one second as soon as it is made, before its connection runs it;
/// counts its wakeups.
final class EarlyWakeupFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: EarlyWakeupFramer.self)
    static var label: String { "EarlyWakeup" }
    static let wakeups = Locked(0)

    static func reset() {
        wakeups.withLock { $0 = 0 }
    }

    required init(framer: NWProtocolFramer.Instance) {
        framer.scheduleWakeup(wakeupTime: .milliseconds(1000))
    }

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {
        Self.wakeups.withLock { $0 += 1 }
    }

    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}
    func handleInput(framer: NWProtocolFramer.Instance) -> Int { 0 }
    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}
