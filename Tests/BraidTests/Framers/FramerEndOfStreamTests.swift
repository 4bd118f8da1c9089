import BraidPerf
import Foundation
import Testing

@testable import Braid
import BraidCore

/// The peer's end of stream and input a framer holds: every message the held input carries is
/// delivered before the stream ends (TLS's close_notify, and a plain FIN), and a framer that
/// never delivers it holds the end for a bounded time only.
@Suite(.timeLimit(.minutes(5))) struct FramerEndOfStreamTests {
    /// A TLS peer (Python's `ssl`) sends 64 pipelined requests and its close_notify in one write.
    /// The framer answers each request with 64 KiB, so after the first its layer holds the rest
    /// of the input behind the bound on answers, in the very pass that also brings the
    /// close_notify: the end must wait behind the held input. The server's application
    /// receives all 64 requests, in order, before the end of stream; the peer reads every
    /// answer, intact, then the server's close_notify.
    @Test func pipelinedRequestsBeforeCloseNotifyAreAllDeliveredWhileInputIsHeld() async throws {
        let requests = 64
        let received = SharedSlot<Progress>()
        let server = try await RunningFramedListener.start(Framer<OneRequestAnsweringFramer> { testTLSServer(alpn: ["pipeline"]) }) { connection in
            // This task alone writes the progress.
            var progress = Progress()
            do {
                while true {
                    let (content, _) = try await connection.receive()
                    let size = OneRequestAnsweringFramer.requestSize
                    if content != Data(PerfPattern.slice(at: progress.count * size, count: size)) { progress.intact = false }
                    progress.count += 1
                    received.value = progress
                }
            } catch NetworkError.unexpectedEndOfStream {
                progress.ended = true
                received.value = progress
            }
        }
        defer { server.task.cancel() }
        let python = try TLSPeerTools.find("python3", package: "python3")
        let peer = try ChildProcess(python, [
            TLSPeerTools.tlsPeerScript, "client", "--host", "127.0.0.1", "--port", String(server.listener.port!.rawValue),
            "--ca", Fixtures.caFile, "--sni", "localhost", "--alpn", "pipeline",
            "--send", String(requests * OneRequestAnsweringFramer.requestSize),
            "--expect", String(requests * OneRequestAnsweringFramer.answerSize), "--timeout", "120",
        ])
        let exit = try await peer.finish(within: 180)
        let report = peer.jsonLines.last ?? [:]
        let state = received.value ?? Progress()
        #expect(state.count == requests, "the server's application received \(state.count) of \(requests) requests before the end of stream")
        #expect(state.intact)
        #expect(state.ended, "the server's application did not see the peer's end of stream")
        #expect(exit.status == 0 && report["ok"] as? Bool == true, "the peer: \(peer.output) \(peer.errors)")
        #expect(report["bytes_received"] as? Int == requests * OneRequestAnsweringFramer.answerSize)
    }

    struct Progress: Sendable {
        var count = 0
        var intact = true
        var ended = false
    }

    // MARK: A plain FIN while the framer holds input

    /// A plain TCP peer sends eight messages and its FIN at once; the framer parses nothing in
    /// `handleInput` (it asks for more) and finishes from an `async` block, after the FIN has
    /// been read: the end waits for the block, and the application receives all eight, in
    /// order, before the end of stream.
    @Test func heldInputIsDeliveredBeforeAPlainFINWhenTheFramerFinishesFromAnAsyncBlock() async throws {
        let outcome = try await Self.sendWithFIN(to: Framer<AsyncFinishingFramer> { TCP() }, messages: 8)
        #expect(outcome.messages == DeferredParsing.messages(8))
        #expect(outcome.ended, "the stream ended with \(String(describing: outcome.error)) instead of its end")
    }

    /// The same, the framer finishing from a wakeup 50 ms after its `handleInput`.
    @Test func heldInputIsDeliveredBeforeAPlainFINWhenTheFramerFinishesFromAWakeup() async throws {
        let outcome = try await Self.sendWithFIN(to: Framer<WakeupFinishingFramer> { TCP() }, messages: 8)
        #expect(outcome.messages == DeferredParsing.messages(8))
        #expect(outcome.ended, "the stream ended with \(String(describing: outcome.error)) instead of its end")
    }

    /// A framer that keeps asking for wakeups and never parses its input holds the peer's end
    /// for at most the connection's handshake timeout (TCP's default here): the application
    /// then gets a protocol error naming the bytes held, not a connection that never ends.
    @Test func aFramerThatNeverFinishesFailsTheConnectionAtTheBound() async throws {
        let outcome = try await Self.sendWithFIN(to: Framer<NeverFinishingFramer> { TCP() }, messages: 3)
        #expect(outcome.messages.isEmpty)
        guard case .protocolError(_, let reason, false)? = outcome.error else {
            Issue.record("the stream ended with \(String(describing: outcome.error)), not the bound's protocol error")
            return
        }
        #expect(reason.contains("held \(DeferredParsing.messages(3).reduce(0) { $0 + 1 + $1.count }) bytes"), "\(reason)")
    }

    struct Outcome: Sendable {
        var messages: [Data] = []
        var ended = false
        var error: NetworkError?
    }

    /// Starts a listener of `stack`; a plain TCP peer sends `messages` framed messages and its
    /// FIN in one send. Returns what the server's application received, and how it ended.
    static func sendWithFIN<T: FramerProtocol & SendableMetatype>(to stack: Framer<T>, messages count: Int) async throws -> Outcome {
        let result = SharedSlot<Outcome>()
        let server = try await RunningFramedListener.start(stack) { connection in
            // This task alone writes the outcome.
            var outcome = Outcome()
            do {
                while true {
                    outcome.messages.append(try await connection.receive().content)
                }
            } catch NetworkError.unexpectedEndOfStream {
                outcome.ended = true
            } catch let error as NetworkError {
                outcome.error = error
            }
            result.value = outcome
        }
        defer { server.task.cancel() }
        let peer = NetworkConnection(to: server.endpoint) { TCP() }
        defer { peer.cancel() }
        try await peer.send(DeferredParsing.messages(count).reduce(Data()) { $0 + [UInt8($1.count)] + $1 }, endOfStream: true)
        let outcome = try await withDeadline(.seconds(120)) {
            while true {
                if let outcome = result.value { return outcome }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return try #require(outcome, "the server's application saw no end of stream")
    }
}

/// Framers that parse nothing in `handleInput` (they ask for the rest of the next message)
/// and finish later: messages are a one-byte length, then the content.
enum DeferredParsing {
    /// Message `index` of `count`: distinct lengths and contents.
    static func messages(_ count: Int) -> [Data] {
        (0 ..< count).map { index in Data((0 ..< 10 + index).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) }) }
    }

    /// What the next message needs in all (its length byte included), or 1 before its length
    /// has arrived: `handleInput`'s answer.
    static func wanted(_ framer: NWProtocolFramer.Instance) -> Int {
        var wanted = 1
        _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { buffer, _ in
            if let buffer, buffer.count == 1 { wanted = 1 + Int(buffer[0]) }
            return 0
        }
        return wanted
    }

    /// Delivers every whole message the input holds.
    static func parseAll(_ framer: NWProtocolFramer.Instance) {
        while true {
            var message: Data?
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 256) { buffer, _ in
                guard let buffer, let length = buffer.first.map(Int.init), buffer.count >= 1 + length else { return 0 }
                message = Data(buffer[1 ..< 1 + length])
                return 1 + length
            }
            guard let message else { return }
            framer.deliverInput(data: message, message: NWProtocolFramer.Message(instance: framer), isComplete: true)
        }
    }
}

/// Parses its input from an `async` block queued by `handleInput`.
final class AsyncFinishingFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: AsyncFinishingFramer.self)
    static var label: String { "AsyncFinishing" }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        framer.async { DeferredParsing.parseAll(framer) }
        return DeferredParsing.wanted(framer)
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Parses its input from a wakeup 50 ms after `handleInput`.
final class WakeupFinishingFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: WakeupFinishingFramer.self)
    static var label: String { "WakeupFinishing" }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) { DeferredParsing.parseAll(framer) }
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        framer.scheduleWakeup(wakeupTime: .milliseconds(50))
        return DeferredParsing.wanted(framer)
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Asks for a wakeup every 20 ms from its first input on and never parses anything.
final class NeverFinishingFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: NeverFinishingFramer.self)
    static var label: String { "NeverFinishing" }

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) { framer.scheduleWakeup(wakeupTime: .milliseconds(20)) }
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        framer.scheduleWakeup(wakeupTime: .milliseconds(20))
        return DeferredParsing.wanted(framer)
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

/// Parses one fixed-size request per `handleInput` call, delivers it as a message and answers
/// it with `answerSize` bytes (the interop peers' pattern, continuing from answer to answer),
/// so one answer reaches the layer's bound on answers and the next request waits behind it.
final class OneRequestAnsweringFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: OneRequestAnsweringFramer.self)
    static var label: String { "OneRequestAnswering" }
    static let requestSize = 16
    static let answerSize = FramerLayer.outputLimit
    private var answered = 0

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult { .ready }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        var request: Data?
        _ = framer.parseInput(minimumIncompleteLength: Self.requestSize, maximumLength: Self.requestSize) { buffer, _ in
            guard let buffer, buffer.count == Self.requestSize else { return 0 }
            request = Data(buffer)
            return Self.requestSize
        }
        guard let request else { return Self.requestSize }
        framer.deliverInput(data: request, message: NWProtocolFramer.Message(instance: framer), isComplete: true)
        framer.writeOutput(data: PerfPattern.slice(at: answered * Self.answerSize, count: Self.answerSize))
        answered += 1
        return Self.requestSize
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}
