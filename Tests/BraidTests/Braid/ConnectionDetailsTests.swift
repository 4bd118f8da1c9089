import Braid
import BraidCore
import Foundation
import Testing

/// What a connection reports (statistics, states, the remote endpoint) and its file session
/// cache, in memory (`MemoryWorld`). `packetsGrowToWhatThePathCarries` stays on loopback: its
/// subject is the packet sizes a real path carries (the kernel's MTU, DF and GSO).
@Suite struct ConnectionDetailsTests {
    @Test(.timeLimit(.minutes(10))) func statisticsAndStateCallbackReportTheConnection() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            let seen = Locked<[NetworkConnectionState]>([])
            connection.onStateUpdate { _, state in seen.withLock { $0.append(state) } }
            let stream = try await connection.openStream()
            let payload = Data(count: 200_000)
            try await stream.send(payload, endOfStream: true)
            _ = try await stream.receive(exactly: payload.count)
            let statistics = try #require(await connection.statistics)
            #expect(statistics.bytesSent > UInt64(payload.count) && statistics.bytesReceived > UInt64(payload.count))
            #expect(statistics.smoothedRTT > .zero && statistics.congestionWindow > 0)
            // A client connection owns its socket: its socket's calls are its own.
            #expect(statistics.sendmsgCalls + statistics.sendmmsgCalls > 0 && statistics.recvmmsgCalls > 0)
            #expect(connection.remoteEndpoint == server.endpoint)
            connection.cancel()
            #expect(seen.withLock { $0 } == [.preparing, .ready, .cancelled])
        }
    }

    /// A 10 MB download over loopback: how large the server's packets were, from the client's
    /// received bytes over datagrams (the handshake's and the first round trips' 1,200-byte
    /// packets included). By default path-MTU discovery raises them from 1,200 to 1,444 (it
    /// never ran while the write buffer had room for the path's current size only); a maximum
    /// above 1,452 is used as is.
    @Test(arguments: [(nil, 1_400), (8952, 8_000)] as [(Int?, Int)])
    func packetsGrowToWhatThePathCarries(_ maximum: Int?, _ expected: Int) async throws {
        let total = 10_000_000
        let server = try await RunningListener.start(configure: { quic in maximum.map { quic.maxUDPPayloadSize($0) } ?? quic }) { connection in
            try await connection.inboundStreams { stream in
                _ = try await stream.receive(exactly: 1)
                let chunk = Data(count: 250_000)
                for index in 0..<(total / chunk.count) { try await stream.send(chunk, endOfStream: index == total / chunk.count - 1) }
            }
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { maximum.map { testClient().maxUDPPayloadSize($0) } ?? testClient() }
        defer { connection.cancel() }
        let stream = try await connection.openStream()
        try await stream.send(Data([1]))
        var received = 0
        while received < total {
            let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1 << 20)
            received += content.count
            if metadata.isEndOfStream { break }
        }
        #expect(received == total)
        let statistics = try #require(await connection.statistics)
        let average = Int(statistics.bytesReceived / max(statistics.packetsReceived, 1))
        #expect(average > expected, "\(statistics.bytesReceived) bytes in \(statistics.packetsReceived) datagrams: \(average) each")
    }

    @Test(.timeLimit(.minutes(10))) func fileSessionCacheResumesAcrossCacheInstances() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("braid-tickets-\(UUID())").path
            defer { try? FileManager.default.removeItem(atPath: file) }
            let first = try QUIC.SessionCache(file: file)
            try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(first) } _: { connection in
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: true)
                _ = try await stream.receive(exactly: 1)
                #expect(try await world.eventually { first.count > 0 }, "no session ticket arrived")
            }
            // A new cache reading the same file, as after a restart of the client.
            let reloaded = try QUIC.SessionCache(file: file)
            #expect(reloaded.count == 1)
            // Tickets hold session secrets: the file is its owner's alone.
            #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
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

    /// A corrupted session-cache file is never trusted: with any one byte of a real ticket file
    /// flipped, the entry's digest no longer matches (or the format is not recognized), the
    /// ticket is dropped, and the connection makes a full handshake and echoes. (Before the
    /// digests, one of these flips crashed the process inside GnuTLS's handshake.)
    @Test(.timeLimit(.minutes(10))) func everyOneByteCorruptionOfATicketFileIsSurvived() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-tickets-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let original = directory.appendingPathComponent("tickets").path
            let cache = try QUIC.SessionCache(file: original)
            try await withNetworkConnection(to: server.endpoint) { testClient().sessionCache(cache) } _: { connection in
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: true)
                _ = try await stream.receive(exactly: 1)
                #expect(try await world.eventually { cache.count > 0 }, "no session ticket arrived")
            }
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: original)))
            // 48 positions spread over the file: the key, the lengths, the ticket's fields.
            let positions = Set((0..<48).map { $0 * bytes.count / 48 })
            var echoed = 0, resumed = 0, failed: [String] = []  // resumed: its 0-RTT data was accepted
            for position in positions.sorted() {
                var corrupted = bytes
                corrupted[position] ^= 0x5A
                let file = directory.appendingPathComponent("corrupt-\(position)").path
                try Data(corrupted).write(to: URL(fileURLWithPath: file))
                let fileCache = try QUIC.SessionCache(file: file)
                let connection = NetworkConnection(to: server.endpoint) { testClient().sessionCache(fileCache) }
                defer { connection.cancel() }
                do {
                    let stream = try await connection.openStream()
                    try await stream.sendIdempotent(Data([2]), endOfStream: true)
                    #expect(try await stream.receive(exactly: 1).content == Data([2]))
                    echoed += 1
                    if connection.earlyDataAccepted { resumed += 1 }
                } catch let error as NetworkError {
                    failed.append("byte \(position): \(error)")
                }
            }
            #expect(failed.isEmpty, "\(failed)")
            #expect(echoed == positions.count)
            #expect(resumed == 0)
            // The server is unharmed.
            try await withNetworkConnection(to: server.endpoint) { testClient() } _: { connection in
                let stream = try await connection.openStream()
                try await stream.send(Data([3]), endOfStream: true)
                #expect(try await stream.receive(exactly: 1).content == Data([3]))
            }
        }
    }
}
