import BraidCore
import Testing
@testable import BraidQUIC

/// The connection-wide send budget (`connectionSendBufferLimit`) over the in-memory wire: a
/// peer that grants no credit holds at most the budget of a sender's bytes, whatever the
/// number of streams; sends resume, on every stream, once credit and acknowledgements come;
/// and a reset stream's bytes go back to the streams waiting for room.
@Suite(.ownThread) struct SendBudgetTests {
    static let budget = 256 * 1024
    static let streamLimit = 128 * 1024

    /// A client whose sends keep to `sendRoom`, with the budget above, toward a server whose
    /// application reads only once `reading` is set (until then the peer grants no credit
    /// beyond its initial 32 KiB stream windows).
    final class Run {
        let network: SimulatedNetwork
        let sink = StreamSink()
        var reading = false
        var server: QUICConnection?
        /// Per stream: the payload and how much of it the engine took.
        var payloads: [Int64: (bytes: [UInt8], offset: Int)] = [:]
        var writable: [Int64] = []
        /// The most the client's engine held at once, checked after every step.
        var mostHeld = 0
        var client: QUICConnection!

        init() throws {
            network = SimulatedNetwork(server: try Fixtures.server {
                $0.transport.initialMaxStreamDataBidirectionalRemote = 32 * 1024
                $0.transport.initialMaxData = 32 * 1024 * 16
            })
            network.onEvent = { [self] connection, event in
                if connection.role == .server {
                    server = connection
                    if reading, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
                    return
                }
                if case .streamWritable(let id) = event {
                    writable.append(id)
                    pump()
                }
            }
            network.onStep = { [self] in
                pump()
                mostHeld = max(mostHeld, client?.unacknowledgedBytes ?? 0)
            }
            client = try network.connect(Fixtures.client {
                $0.transport.connectionSendBufferLimit = SendBudgetTests.budget
                $0.transport.streamSendBufferLimit = SendBudgetTests.streamLimit
            })
            #expect(network.run { client.isEstablished })
        }

        /// Opens `count` streams, each with `size` pattern bytes and FIN to send.
        func open(_ count: Int, size: Int) throws -> [Int64] {
            var ids: [Int64] = []
            for index in 0..<count {
                let id = try client.openStream(bidirectional: true)
                payloads[id] = (pattern(seed: UInt64(index + 1), count: size), 0)
                ids.append(id)
            }
            pump()
            return ids
        }

        /// Gives the engine what it takes of each stream, in 16 KiB pieces sized by `sendRoom`.
        func pump() {
            guard let client else { return }
            for id in payloads.keys.sorted() {
                guard var payload = payloads[id], payload.offset < payload.bytes.count else { continue }
                while payload.offset < payload.bytes.count {
                    let room = client.sendRoom(streamID: id)
                    guard room > 0 else { break }
                    let end = min(payload.offset + min(16 * 1024, room), payload.bytes.count)
                    try? client.send(
                        streamID: id, bytes: payload.bytes[payload.offset..<end], fin: end == payload.bytes.count)
                    payload.offset = end
                }
                payloads[id] = payload
            }
            mostHeld = max(mostHeld, client.unacknowledgedBytes)
        }
    }

    @Test func budgetHoldsWithoutCreditAndSendsResumeWhenCreditComes() throws {
        let run = try Run()
        let client = run.client!
        // Eight streams could hold 8 x 128 KiB; the budget allows 256 KiB in all.
        let ids = try run.open(8, size: 512 * 1024)
        run.network.run(for: .seconds(10)) { false }
        #expect(run.mostHeld <= Self.budget, "held \(run.mostHeld) bytes, budget \(Self.budget)")
        #expect(client.unacknowledgedBytes == Self.budget, "the budget did not fill: \(client.unacknowledgedBytes)")
        for id in ids {
            #expect(client.unacknowledgedBytes(streamID: id) <= Self.streamLimit + 16 * 1024)
        }
        let waiting = ids.filter { client.sendRoom(streamID: $0) == 0 }
        #expect(waiting.count == ids.count, "every stream must wait at the budget")

        // Credit comes: every stream finishes, intact, and the budget held throughout.
        run.reading = true
        if let server = run.server { for id in ids { run.sink.drain(server, stream: id) } }
        let server = try #require(run.server)
        #expect(run.network.run(for: .seconds(300)) { ids.allSatisfy { run.sink.finished[ObjectIdentifier(server)]?.contains($0) == true } })
        for id in ids {
            #expect(run.sink.bytes(server, id) == run.payloads[id]?.bytes, "stream \(id)")
        }
        #expect(run.mostHeld <= Self.budget, "held \(run.mostHeld) bytes, budget \(Self.budget)")
        // Streams that found no room at first were woken by the budget, not only by their own
        // acknowledgements (they had none).
        #expect(Set(run.writable).isSuperset(of: ids.suffix(6)), "woken: \(Set(run.writable))")
        // Once the last acknowledgements arrive, the budget is back to nothing held.
        #expect(run.network.run(for: .seconds(10)) { client.unacknowledgedBytes == 0 }, "\(client.unacknowledgedBytes)")
    }

    @Test func resetStreamGivesItsRoomToWaitingStreams() throws {
        let run = try Run()
        let client = run.client!
        let ids = try run.open(3, size: 512 * 1024)
        run.network.run(for: .seconds(5)) { false }
        // The first two streams hold the budget; the third waits without a byte queued.
        #expect(client.unacknowledgedBytes == Self.budget)
        #expect(client.unacknowledgedBytes(streamID: ids[2]) == 0)
        #expect(client.sendRoom(streamID: ids[2]) == 0)
        run.writable.removeAll()

        try client.resetStream(streamID: ids[0], applicationErrorCode: 9)
        run.payloads[ids[0]] = nil
        run.network.run(for: .seconds(1)) { run.writable.contains(ids[2]) }
        #expect(run.writable.contains(ids[2]), "the waiting stream was not woken")
        #expect(client.unacknowledgedBytes(streamID: ids[2]) > 0, "the waiting stream got no room")
        #expect(run.mostHeld <= Self.budget)
    }

    /// The peer stops a stream that holds part of the budget (STOP_SENDING, and finishes its
    /// own side so the stream closes): its bytes leave the budget and a waiting stream gets room.
    @Test func stopSendingGivesItsRoomToWaitingStreams() throws {
        let run = try Run()
        let client = run.client!
        let ids = try run.open(3, size: 512 * 1024)
        run.network.run(for: .seconds(5)) { false }
        #expect(client.unacknowledgedBytes == Self.budget)
        #expect(client.sendRoom(streamID: ids[2]) == 0)
        let server = try #require(run.server)
        run.writable.removeAll()

        try server.stopSending(streamID: ids[0], applicationErrorCode: 7)
        try server.send(streamID: ids[0], bytes: [UInt8](), fin: true)
        run.network.run(for: .seconds(5)) { run.writable.contains(ids[2]) }
        #expect(run.writable.contains(ids[2]), "the waiting stream was not woken")
        #expect(client.unacknowledgedBytes(streamID: ids[2]) > 0, "the waiting stream got no room")
        #expect(run.mostHeld <= Self.budget)
    }

    /// Streams get room in the order they waited, and one that got room goes to the back:
    /// waiters that got nothing keep their place ahead of it for the next round.
    @Test func waitersAreWokenInTurn() {
        var budget = SendBudget<StreamState>.streams(limit: 100)
        let streams = (0..<3).map { StreamState(id: Int64($0 * 4)) }
        budget.added(100, by: streams[0])
        #expect(budget.room == 0)
        for index in [1, 2, 0] { budget.refused(streams[index]) }
        // Not yet a round: less than a quarter is free.
        budget.released(20)
        #expect(!budget.roundDue)
        budget.released(10)
        #expect(budget.roundDue)
        #expect(budget.takeRound().map(\.id) == [4, 8, 0])
        #expect(!budget.roundDue)
        // Stream 4 takes the room; everyone is refused again.
        budget.added(30, by: streams[1])
        for index in [2, 0, 1] { budget.refused(streams[index]) }
        budget.released(50)
        #expect(budget.takeRound().map(\.id) == [8, 0, 4])
    }
}
