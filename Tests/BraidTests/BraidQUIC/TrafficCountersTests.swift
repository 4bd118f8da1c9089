import Testing
@testable import BraidQUIC

@Suite struct TrafficCountersTests {
    @Test func countsDatagramsBytesBatchesAndLosses() {
        var counters = TrafficCounters()
        counters.sentBatch(packets: 3, bytes: 3600)
        counters.sent(packets: 1, bytes: 50)
        counters.received(bytes: 1200)
        counters.received(bytes: 40)
        counters.datagramLost()
        #expect(counters.packetsSent == 4)
        #expect(counters.bytesSent == 3650)
        #expect(counters.transmits == 1, "a lone close packet is not a batch")
        #expect(counters.packetsReceived == 2)
        #expect(counters.bytesReceived == 1240)
        #expect(counters.datagramsLost == 1)
    }
}
