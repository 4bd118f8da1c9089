import Braid
import BraidHTTP3
import BraidPerf
import Foundation
import Testing

/// Field-section and QPACK floods from a real HTTP/3 peer
/// (`Tests/Interop/peers/aioquic_h3_hostile.py`, writing its own QPACK bytes on aioquic's
/// streams) against `braid serve --alpn h3`: each request or instruction past a limit ends
/// with RFC 9114's or RFC 9204's code, what the server holds stays bounded, and it serves a
/// legitimate client afterwards.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HTTP3FloodTests {
    /// 50 requests, each a 256 KiB header section of literal fields (the limit is 64 KiB): each
    /// request stream is reset with H3_EXCESSIVE_LOAD and the fields past the limit are not
    /// kept, so the connection goes on and memory stays put.
    @Test func oversizedFieldSectionsAreResetWithExcessiveLoad() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "field-section-flood", count: 50), within: 120)
        print("field-section flood: \(report); \(server.memory())")
        let resets = report["resets"] as? [String: Int] ?? [:]
        #expect(resets[String(BraidHTTP3.HTTP3ErrorCode.excessiveLoad.code)] == 50, "\(report)")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// 50,000 inserts of 100-byte entries (5 MB) on the QPACK encoder stream: the server's
    /// dynamic table holds 4 KiB, so each evicts older ones; the connection goes on and memory
    /// stays put.
    @Test func qpackInsertFloodStaysWithinTheTableCapacity() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "qpack-insert-flood", count: 50_000), within: 180)
        print("QPACK insert flood: \(report); \(server.memory())")
        #expect(report["alive"] as? Bool == true, "\(report)")
        #expect(server.peakGrowth < 32 << 20, "\(server.memory())")
        try await server.expectServes()
    }

    /// One insert larger than the table capacity the server allows closes the connection
    /// with QPACK_ENCODER_STREAM_ERROR.
    @Test func anInsertLargerThanTheTableClosesWithEncoderStreamError() async throws {
        let server = try await ServeProcess.start(http3: true)
        defer { Task { await server.process.stop() } }
        let report = try await runClient(try flood(server, mode: "qpack-oversized-insert", count: 1), within: 60)
        #expect(report["closed"] as? Int == Int(BraidHTTP3.HTTP3ErrorCode.qpackEncoderStreamError.code), "\(report)")
        try await server.expectServes()
    }

    private func flood(_ server: ServeProcess, mode: String, count: Int) throws -> ChildProcess {
        try PeerProcess.aioquicHTTP3Hostile([
            "client", "--mode", mode, "--port", String(server.port), "--ca", Fixtures.caFile, "--sni", "localhost",
            "--count", String(count), "--timeout", "60",
        ])
    }
}
