import Braid
import BraidPerf
import Foundation
import Synchronization
import Testing

/// aioquic clients that break a Braid listener's limits on purpose
/// (`Tests/Interop/peers/hostile_peer.py`) get a CONNECTION_CLOSE with RFC 9000's transport
/// error, the listener's side of the connection fails with a `NetworkError` naming it, and the
/// listener goes on serving everyone else.
@Suite(.serialized) struct HostilePeerTests {
    /// A violation and the transport error code it must be closed with.
    struct Violation: Sendable, CustomTestStringConvertible {
        var mode: String
        var code: Int
        /// RFC 9000's name of the code, which the listener's error must give.
        var name: String
        var testDescription: String { "\(mode) -> \(name)" }
    }

    static let violations = [
        Violation(mode: "streams", code: 0x4, name: "STREAM_LIMIT_ERROR"),
        Violation(mode: "stream-data", code: 0x3, name: "FLOW_CONTROL_ERROR"),
        Violation(mode: "connection-data", code: 0x3, name: "FLOW_CONTROL_ERROR"),
        Violation(mode: "stream-state", code: 0x5, name: "STREAM_STATE_ERROR"),
        Violation(mode: "final-size", code: 0x6, name: "FINAL_SIZE_ERROR"),
    ]

    /// How the listener's connections ended.
    final class Endings: Sendable {
        let failures = Mutex<[NetworkError]>([])
    }

    /// A listener with small limits (8 streams, 16 KiB per stream, 64 KiB per connection):
    /// `echo` connections are echoed, `hostile` ones are never read, so no credit comes back
    /// and any byte past a window is a violation.
    static func startListener(_ endings: Endings) async throws -> RunningListener {
        try await RunningListener.start(alpn: ["echo", "hostile"], configure: {
            $0.initialMaxBidirectionalStreams(8).initialMaxStreamDataBidirectionalRemote(16384).initialMaxData(65536)
        }) { connection in
            for await state in connection.states {
                if state == .ready, connection.negotiatedALPN == "echo" { return try await echo(connection) }
                if case .failed(let error) = state { endings.failures.withLock { $0.append(error) } }
            }
        }
    }

    @Test(arguments: violations)
    func violationIsClosedWithItsTransportError(_ violation: Violation) async throws {
        let endings = Endings()
        let server = try await Self.startListener(endings)
        defer { server.task.cancel() }
        let hostile = try PeerProcess.hostile([
            "--host", "127.0.0.1", "--port", String(server.listener.port!.rawValue), "--alpn", "hostile",
            "--ca", Fixtures.caFile, "--sni", "localhost", "--violate", violation.mode,
        ])
        let report = try await runClient(hostile, within: 60)
        #expect(report["closed_by"] as? String == "peer", "\(report)\nstderr: \(hostile.errors)")
        #expect(report["error_code"] as? Int == violation.code, "\(report)")
        // A transport close (0x1c) carries the frame type; an application close (0x1d) has none.
        #expect(report["frame_type"] is Int, "\(report)")
        #expect((report["reason"] as? String)?.isEmpty == false, "\(report)")

        // The listener's side failed with the violation, named.
        let deadline = ContinuousClock.now + .seconds(10)
        while endings.failures.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let failures = endings.failures.withLock { $0 }
        #expect(failures.count == 1, "\(failures)")
        if case .protocolError(let code, let reason, let byPeer) = failures.first {
            #expect(code == UInt64(violation.code))
            #expect(!byPeer)
            #expect(!reason.isEmpty)
            #expect(failures[0].description.contains(violation.name), "\(failures[0])")
        } else {
            Issue.record("the listener's connection ended with \(failures), not a protocol error")
        }

        // Everyone else is still served.
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        defer { connection.cancel() }
        #expect(try await echoOnConcurrentStreams(connection, count: 4) == 4)
    }
}
