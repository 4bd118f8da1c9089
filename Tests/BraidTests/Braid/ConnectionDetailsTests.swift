import Braid
import Foundation
import Synchronization
import Testing

@Suite struct ConnectionDetailsTests {
    @Test func statisticsAndStateCallbackReportTheConnection() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { testClient() }
        let seen = Mutex<[NetworkConnectionState]>([])
        connection.onStateUpdate { _, state in seen.withLock { $0.append(state) } }
        let stream = try await connection.openStream()
        let payload = Data(count: 200_000)
        try await stream.send(payload, endOfStream: true)
        _ = try await stream.receive(exactly: payload.count)
        let statistics = try #require(await connection.statistics)
        #expect(statistics.bytesSent > UInt64(payload.count) && statistics.bytesReceived > UInt64(payload.count))
        #expect(statistics.smoothedRTT > .zero && statistics.congestionWindow > 0)
        // A client connection owns its socket: its system calls are its own.
        #expect(statistics.sendmsgCalls + statistics.sendmmsgCalls > 0 && statistics.recvmmsgCalls > 0)
        #expect(connection.remoteEndpoint == server.endpoint)
        connection.cancel()
        #expect(seen.withLock { $0 } == [.preparing, .ready, .cancelled])
    }

    @Test func fileSessionCacheResumesAcrossCacheInstances() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("braid-tickets-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let first = try QUIC.SessionCache(file: file)
        try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(first) } _: { connection in
            let stream = try await connection.openStream()
            try await stream.send(Data([1]), endOfStream: true)
            _ = try await stream.receive(exactly: 1)
            while first.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        // A new cache reading the same file, as after a restart of the client.
        let reloaded = try QUIC.SessionCache(file: file)
        #expect(reloaded.count == 1)
        let resumed = NetworkConnection(to: server.endpoint) { testClient().sessionCache(reloaded) }
        defer { resumed.cancel() }
        let stream = try await resumed.openStream()
        try await stream.sendIdempotent(Data([2]), endOfStream: true)
        #expect(try await stream.receive(exactly: 1).content == Data([2]))
        #expect(resumed.earlyDataAccepted)
        // A corrupt file is ignored, not trusted. (Its own file: the resumed connection may
        // still be storing the ticket it was just sent into `file`.)
        let corrupt = file + ".corrupt"
        defer { try? FileManager.default.removeItem(atPath: corrupt) }
        try Data([0, 0, 0, 9, 1, 2]).write(to: URL(fileURLWithPath: corrupt))
        #expect(try QUIC.SessionCache(file: corrupt).count == 0)
    }
}
