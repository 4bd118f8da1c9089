import Testing
@testable import BraidQUIC

/// A listener's connections' receive windows, which Braid grants and tunes itself
/// (`ReceiveWindowLedger`), over the in-memory wire: they start small, grow while the
/// application reads, stop at the listener's limit, and bound what ngtcp2 may hold.
@Suite(.ownThread) struct ReceiveWindowTests {
    /// 4 MiB echoed through a listener's connection: its windows start at the listener's
    /// defaults (256 KiB, 64 KiB per stream) and grow as the echo reads, and every byte arrives.
    @Test func aListenerConnectionsWindowsGrowAsItsApplicationReads() throws {
        let run = try StreamTests.EchoRun()
        let client = try run.connect(Fixtures.client())
        let server = try #require(run.network.serverConnections.first)
        #expect(server.receiveWindows.tunes)
        #expect(server.receiveWindows.connectionWindow == QUICTransportConfiguration.listenerInitialMaxData)
        #expect(!client.receiveWindows.tunes)
        let payload = pattern(seed: 3, count: 4 << 20)
        let id = try run.startEcho(client, payload: payload)
        #expect(run.network.run(for: .seconds(120)) { run.clientSink.isFinished(client, id) })
        #expect(run.clientSink.bytes(client, id) == payload)
        #expect(server.receiveWindows.connectionWindow > QUICTransportConfiguration.listenerInitialMaxData)
        // All that was granted was handed over or still may come: the bound is what is left.
        #expect(server.receiveWindows.connectionGranted >= server.receiveWindows.delivered)
    }

    /// At the listener's limit (`withholdReceiveCredit(true)`) the connection grants nothing
    /// more, though its application reads: the client stops at the first window and the bound
    /// on what ngtcp2 may hold falls to nothing but the buffers' own; released, the rest flows.
    @Test func withheldCreditStopsThePeerUntilReleased() throws {
        let run = try StreamTests.EchoRun()
        let client = try run.connect(Fixtures.client())
        let server = try #require(run.network.serverConnections.first)
        #expect(server.withholdReceiveCredit(true) == false)
        let payload = pattern(seed: 5, count: 1 << 20)
        let id = try run.startEcho(client, payload: payload)
        run.network.settle()
        let received = run.echo.sink.bytes(server, id).count
        #expect(received == Int(QUICTransportConfiguration.listenerInitialMaxStreamData), "received \(received)")
        #expect(!run.clientSink.isFinished(client, id))
        // Everything granted was handed over and read: ngtcp2 may hold only the stream's
        // buffer.
        #expect(server.engineReceiveBound <= Int(ReceiveWindowLedger.reassemblyOverhead + ReceiveWindowLedger.pieceSize))

        #expect(server.withholdReceiveCredit(false))
        #expect(run.network.run(for: .seconds(120)) { run.clientSink.isFinished(client, id) })
        #expect(run.clientSink.bytes(client, id) == payload)
    }

    /// A server application that never reads: what the client sent that ngtcp2 took counts in
    /// the connection's `heldBytes`, and the bound never passes the windows granted with their
    /// pieces and buffers.
    @Test func unreadBytesAndTheEngineBoundStayWithinTheWindows() throws {
        let network = SimulatedNetwork(seed: 9, server: try Fixtures.server())
        let source = StreamSource()
        network.onEvent = { connection, event in
            if connection.role == .client, case .streamWritable = event { source.pump() }
        }
        network.onStep = { source.pump() }
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        var ids: [Int64] = []
        for index in 0..<4 {
            let id = try client.openStream(bidirectional: true)
            source.enqueue(client, stream: id, bytes: pattern(seed: UInt64(index), count: 1 << 20))
            ids.append(id)
        }
        network.settle()
        let server = try #require(network.serverConnections.first)
        let delivered = Int(server.receiveWindows.delivered)
        // Four streams of 64 KiB fill the 256 KiB connection window.
        #expect(delivered == Int(QUICTransportConfiguration.listenerInitialMaxData), "delivered \(delivered)")
        #expect(server.heldBytes >= delivered)
        let buffers = 4 * Int(ReceiveWindowLedger.reassemblyOverhead)
        #expect(server.engineReceiveBound <= buffers, "bound \(server.engineReceiveBound)")
        #expect(server.heldBytes <= delivered + buffers + 4 * Int(ReceiveWindowLedger.pieceSize))
    }

    /// The pieces that may hold a stream's bytes between what was handed over and its limit.
    @Test func piecesCoverWhatLiesBetweenDeliveredAndLimit() {
        let piece = ReceiveWindowLedger.pieceSize
        #expect(ReceiveWindowLedger.pieces(delivered: 0, limit: 64 << 10) == 64 << 10)
        #expect(ReceiveWindowLedger.pieces(delivered: 0, limit: 1) == piece)
        #expect(ReceiveWindowLedger.pieces(delivered: 100, limit: piece + 1) == 2 * piece)
        // Everything handed over: only a partly handed-over piece may stay.
        #expect(ReceiveWindowLedger.pieces(delivered: 2 * piece, limit: 2 * piece) == 0)
        #expect(ReceiveWindowLedger.pieces(delivered: 7, limit: 7) == piece)
    }
}
