import BraidPerf
import Foundation
import Testing

@testable import Braid
import BraidCore

/// The peer's end of stream and input a framer holds: every message the held input carries is
/// delivered before the stream ends.
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
