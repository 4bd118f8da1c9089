import Testing
@testable import BraidQUIC

/// How a sender shares its packets among streams with bytes to send: turns of up to
/// `QUICConnection.streamSendQuantum` bytes, less when the window's share per stream is smaller.
@Suite(.ownThread) struct StreamSchedulingTests {
    /// A client sending on several streams to a server that reads each stream as it becomes
    /// readable (the wire delivers one packet at a time), logging each read in arrival order.
    final class Upload {
        let network: SimulatedNetwork
        let source = StreamSource()
        let sink = StreamSink()
        /// The server's reads in order: the stream and how many bytes.
        var reads: [(stream: Int64, count: Int)] = []
        let client: QUICConnection

        init() throws {
            // Windows larger than the uploads: no stream ever waits for credit, so any stream
            // with bytes queued may take the next turn.
            network = SimulatedNetwork(seed: 3, server: try Fixtures.server {
                $0.transport.initialMaxData = 64 * 1024 * 1024
                $0.transport.initialMaxStreamDataBidirectionalRemote = 16 * 1024 * 1024
            })
            client = try network.connect(Fixtures.client())
            network.onEvent = { [unowned self, sink, source] connection, event in
                switch event {
                case .streamReadable(let id) where connection.role == .server:
                    let read = sink.drain(connection, stream: id)
                    if !read.bytes.isEmpty { self.reads.append((id, read.bytes.count)) }
                case .streamWritable where connection.role == .client:
                    source.pump()
                default: break
                }
            }
            network.onStep = { [source] in source.pump() }
            #expect(network.run { client.isEstablished || client.isClosed })
            #expect(client.isEstablished)
        }

        var server: QUICConnection { network.serverConnections[0] }

        func send(_ bytes: [UInt8]) throws -> Int64 {
            let id = try client.openStream(bidirectional: true)
            source.enqueue(client, stream: id, bytes: bytes)
            return id
        }

        /// Bytes the server has read from `stream`.
        func received(_ stream: Int64) -> Int { sink.bytes(server, stream).count }
    }

    /// Consecutive reads of one stream merged: how many bytes a stream delivered before another
    /// stream's bytes came in between.
    static func runs(_ reads: [(stream: Int64, count: Int)]) -> [Int] {
        var runs: [Int] = []
        var current: Int64?
        for read in reads {
            if read.stream == current { runs[runs.count - 1] += read.count } else { runs.append(read.count) }
            current = read.stream
        }
        return runs
    }

    @Test func busyStreamsSendManyPacketsPerTurnOnceTheWindowAllows() throws {
        let upload = try Upload()
        let payloads = (0..<4).map { pattern(seed: UInt64($0), count: 2 * 1024 * 1024) }
        let ids = try payloads.map { try upload.send($0) }
        #expect(upload.network.run(for: .seconds(120)) { ids.allSatisfy { upload.sink.isFinished(upload.server, $0) } })
        for (id, payload) in zip(ids, payloads) { #expect(upload.sink.bytes(upload.server, id) == payload) }

        // While all four streams have bytes to send, past the first 512 KiB of each (the window
        // then holds several turns): each stream's bytes arrive in long runs, not a packet at a
        // time (a reader wakes once per run), and every stream gets turns.
        var totals: [Int64: Int] = [:]
        let steady = upload.reads.filter { read in
            totals[read.stream, default: 0] += read.count
            return ids.allSatisfy { (512 * 1024..<2 * 1024 * 1024 - 256 * 1024).contains(totals[$0, default: 0]) }
        }
        let runs = Self.runs(steady)
        #expect(runs.count >= 8, "\(runs.count) runs")
        let median = runs.sorted()[runs.count / 2]
        #expect(median >= 32 * 1024, "median run \(median) bytes over \(runs.count) runs")
        #expect(Set(steady.map(\.stream)).count == 4)
    }

    @Test func aShortMessageWaitsAboutOneWindowBehindBusyStreams() throws {
        let upload = try Upload()
        let bulk = try (0..<8).map { _ in try upload.send(pattern(seed: 9, count: 4 * 1024 * 1024)) }
        // Let the bulk streams fill the window first.
        #expect(upload.network.run(for: .seconds(60)) { bulk.reduce(0) { $0 + upload.received($1) } >= 2 * 1024 * 1024 })
        let before = bulk.reduce(0) { $0 + upload.received($1) }
        var window = Int(upload.client.statistics.congestionWindow)
        let message = try upload.send(Array("ready?".utf8))
        #expect(upload.network.run(for: .seconds(60)) {
            window = max(window, Int(upload.client.statistics.congestionWindow))
            return upload.sink.isFinished(upload.server, message)
        })
        // What arrived on the busy streams meanwhile: the bytes already in flight when the
        // message was queued (at most a window), then at most each busy stream's turn (shares of
        // a window, at least a packet each) before the message's own turn.
        let meanwhile = bulk.reduce(0) { $0 + upload.received($1) } - before
        #expect(meanwhile <= 2 * window + bulk.count * 1500, "\(meanwhile) bytes of busy streams first, window \(window)")
        #expect(upload.sink.bytes(upload.server, message) == Array("ready?".utf8))
    }
}
