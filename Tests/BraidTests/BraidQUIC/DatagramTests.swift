import Testing
@testable import BraidQUIC

@Suite(.ownThread) struct DatagramTests {
    func established(conditions: LinkConditions = LinkConditions(), seed: UInt64 = 1)
        throws -> (SimulatedNetwork, QUICConnection, [(bytes: [UInt8], early: Bool)])
    {
        let network = SimulatedNetwork(seed: seed, server: try Fixtures.server())
        network.conditions = conditions
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        return (network, client, [])
    }

    /// Datagram `index`: 8-byte index, then a pattern derived from it.
    func datagram(_ index: Int, size: Int = 1000) -> [UInt8] {
        withUnsafeBytes(of: UInt64(index).bigEndian, Array.init) + pattern(seed: UInt64(index), count: size - 8)
    }

    @Test func datagramsArriveIntact() throws {
        let (network, client, _) = try established()
        var received: [[UInt8]] = []
        network.onEvent = { connection, event in
            if connection.role == .server, case .datagramReceived(let bytes, let early) = event {
                #expect(!early)
                received.append(bytes)
            }
        }
        for index in 0..<200 { try client.sendDatagram(datagram(index)) }
        #expect(network.run { received.count == 200 })
        #expect(Set(received) == Set((0..<200).map { datagram($0) }))
    }

    // Several seeds: the losses fall on different packets (ACK-only flights included, which
    // once stalled both ends; see the datagram probe in QUICConnection).
    @Test(arguments: [77, 5, 2024] as [UInt64])
    func underLossSurvivorsAreIntactAndLossIsReported(seed: UInt64) throws {
        var conditions = LinkConditions()
        conditions.dropRate = 0.10
        let (network, client, _) = try established(conditions: conditions, seed: seed)
        var received: [[UInt8]] = []
        var acknowledged = Set<UInt64>()
        var lost = Set<UInt64>()
        network.onEvent = { connection, event in
            switch (connection.role, event) {
            case (.server, .datagramReceived(let bytes, _)): received.append(bytes)
            case (.client, .datagramAcknowledged(let id)): acknowledged.insert(id)
            case (.client, .datagramLost(let id)): lost.insert(id)
            default: break
            }
        }
        let count = 500
        for index in 0..<count { try client.sendDatagram(datagram(index)) }
        network.run(for: .seconds(30)) { acknowledged.count + lost.count == count }
        network.settle()
        let expected = Set((0..<count).map { datagram($0) })
        #expect(!received.isEmpty)
        #expect(received.allSatisfy { expected.contains($0) }, "a received datagram was altered")
        #expect(Set(received).count == received.count, "a datagram was delivered twice")
        #expect(received.count < count, "10% loss must lose some")
        #expect(!lost.isEmpty, "losses must be reported to the sender")
        #expect(acknowledged.count + lost.count == count, "acknowledged \(acknowledged.count), lost \(lost.count)")
        #expect(client.statistics.datagramsLost == UInt64(lost.count))
        #expect(acknowledged.isSubset(of: Set(0..<UInt64(count))))
    }

    /// Datagrams smaller than a packet go out several to a packet (ngtcp2 is asked for more
    /// after each), a sink takes them in place of per-datagram events, and the engine raises
    /// one `datagramsReceived` for everything the sink took until it is polled.
    @Test func smallDatagramsShareAPacketAndASinkTakesThemInBatches() throws {
        let (network, client, _) = try established()
        let server = try #require(network.serverConnections.first)
        let sink = CollectingDatagramSink()
        server.datagramSink = sink
        var batchEvents = 0
        var perDatagramEvents = 0
        network.onEvent = { connection, event in
            guard connection.role == .server else { return }
            if case .datagramsReceived = event { batchEvents += 1 }
            if case .datagramReceived = event { perDatagramEvents += 1 }
        }
        let count = 200
        for index in 0..<count { try client.sendDatagram(payload: datagram(index, size: 100)) }
        let before = network.delivered
        #expect(network.run { sink.received.count == count })
        let packets = network.delivered - before
        #expect(Set(sink.received) == Set((0..<count).map { datagram($0, size: 100) }))
        #expect(perDatagramEvents == 0)
        // About 11 datagrams of 100 bytes fit a 1,200-byte packet.
        #expect(packets < count / 4, "\(packets) packets for \(count) datagrams")
        #expect(batchEvents >= 1 && batchEvents <= packets)
    }

    /// Datagrams of the largest size each take a packet of their own (ngtcp2 finishes the
    /// packet in the call that places one), and small datagrams queued behind them still share
    /// packets: everything arrives intact.
    @Test func largestDatagramsTakeAPacketEachAndSmallOnesBehindThemStillShare() throws {
        let (network, client, _) = try established()
        let server = try #require(network.serverConnections.first)
        let sink = CollectingDatagramSink()
        server.datagramSink = sink
        let largest = client.maxDatagramPayloadSize
        var sent: [[UInt8]] = []
        for index in 0..<40 { sent.append(datagram(index, size: largest)) }
        for index in 40..<140 { sent.append(datagram(index, size: 100)) }
        for index in 140..<160 { sent.append(datagram(index, size: index % 2 == 0 ? largest : 60)) }
        let packetsBefore = client.statistics.packetsSent
        for bytes in sent { try client.sendDatagram(payload: bytes) }
        #expect(network.run { sink.received.count == sent.count })
        #expect(Set(sink.received) == Set(sent))
        let packets = client.statistics.packetsSent - packetsBefore
        // 50 of the largest, one packet each; 100 of 100 bytes, about 11 to a packet.
        #expect(packets >= 50 && packets < 100, "\(packets) packets for \(sent.count) datagrams")
    }

    /// With `reportsEachDatagramOutcome` off, acknowledgements and losses come as one
    /// `datagramsSettled` until polled, never one event per datagram, and losses are still
    /// counted.
    @Test func outcomesFoldIntoOneEventPerPollWhenAsked() throws {
        var conditions = LinkConditions()
        conditions.dropRate = 0.10
        let (network, client, _) = try established(conditions: conditions, seed: 5)
        client.reportsEachDatagramOutcome = false
        var settledEvents = 0
        var perDatagramEvents = 0
        var received = 0
        network.onEvent = { connection, event in
            switch (connection.role, event) {
            case (.client, .datagramsSettled): settledEvents += 1
            case (.client, .datagramAcknowledged), (.client, .datagramLost): perDatagramEvents += 1
            case (.server, .datagramReceived): received += 1
            default: break
            }
        }
        let count = 300
        for index in 0..<count { try client.sendDatagram(datagram(index)) }
        network.run(for: .seconds(30)) { client.pendingDatagramCount == 0 && received > 0 }
        network.settle()
        #expect(perDatagramEvents == 0)
        #expect(settledEvents >= 1 && settledEvents < count, "\(settledEvents) events for \(count) datagrams")
        #expect(received < count, "10% loss must lose some")
        #expect(client.statistics.datagramsLost > 0)
    }

    @Test func oversizedDatagramIsAClearError() throws {
        let (_, client, _) = try established()
        let maximum = client.maxDatagramPayloadSize
        #expect(maximum > 1000 && maximum < 1452)
        #expect(throws: QUICError.datagramTooLarge(size: maximum + 1, maximum: maximum)) {
            try client.sendDatagram([UInt8](repeating: 0, count: maximum + 1))
        }
        try client.sendDatagram([UInt8](repeating: 0, count: maximum))
    }

    @Test func datagramsDisabledByPeerIsAClearError() throws {
        let network = SimulatedNetwork(server: try Fixtures.server { $0.transport.maxDatagramFrameSize = 0 })
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        #expect(throws: QUICError.datagramsNotSupported) { try client.sendDatagram([1, 2, 3]) }
    }
}

/// Keeps what the engine hands it, in order.
final class CollectingDatagramSink: QUICDatagramSink {
    var received: [[UInt8]] = []

    func receive(_ bytes: UnsafeRawBufferPointer, early: Bool) {
        received.append(Array(bytes))
    }
}
