import Testing
@testable import BraidQUIC

/// The keep-alive arithmetic behind the datagram probe, without a connection.
@Suite struct DatagramProbeTests {
    let pto: UInt64 = 30_000_000
    func at(milliseconds: UInt64) -> QUICInstant { QUICInstant(nanoseconds: 1_000_000_000 + milliseconds * 1_000_000) }

    @Test func nothingInFlightKeepsTheConfiguredKeepAlive() {
        var off = DatagramProbe(configuredKeepAlive: 0)
        #expect(off.keepAliveChange(pto: pto) == nil)
        var configured = DatagramProbe(configuredKeepAlive: 5_000_000_000)
        #expect(configured.appliedKeepAlive == 5_000_000_000)
        #expect(configured.keepAliveChange(pto: pto) == nil)
    }

    @Test func ptoIsNotAskedForWhileNothingIsInFlight() {
        var probe = DatagramProbe(configuredKeepAlive: 0)
        var asked = false
        _ = probe.keepAliveChange(pto: { asked = true; return pto }())
        #expect(!asked)
    }

    @Test func inFlightShortensTheKeepAliveToThePTOAndBackAfterwards() {
        var probe = DatagramProbe(configuredKeepAlive: 0)
        probe.datagramSent()
        probe.datagramSent()
        #expect(probe.keepAliveChange(pto: pto) == pto)
        #expect(probe.keepAliveChange(pto: pto) == nil, "already applied")
        probe.datagramResolved()
        #expect(probe.keepAliveChange(pto: pto) == nil, "one datagram still in flight")
        probe.datagramResolved()
        #expect(probe.inFlight == 0)
        #expect(probe.keepAliveChange(pto: pto) == 0, "back to no keep-alive")
        probe.datagramResolved()
        #expect(probe.inFlight == 0, "never below zero")
    }

    @Test func aShorterConfiguredKeepAliveWins() {
        var short = DatagramProbe(configuredKeepAlive: 10_000_000)
        short.datagramSent()
        #expect(short.keepAliveChange(pto: pto) == nil)
        var long = DatagramProbe(configuredKeepAlive: 15_000_000_000)
        long.datagramSent()
        #expect(long.keepAliveChange(pto: pto) == pto)
        long.datagramResolved()
        #expect(long.keepAliveChange(pto: pto) == 15_000_000_000)
    }

    @Test func eachExpiryWithoutProgressDoublesTheKeepAliveUpToTheCap() {
        var probe = DatagramProbe(configuredKeepAlive: 0)
        probe.datagramSent()
        probe.noteActivity(at: at(milliseconds: 0))
        #expect(probe.keepAliveChange(pto: pto) == pto)
        // A timer before the keep-alive is due (e.g. loss detection) is not the probe.
        probe.timerFired(at: at(milliseconds: 29))
        #expect(probe.backoff == 0)
        #expect(probe.keepAliveChange(pto: pto) == nil)
        var expected = pto
        for round in 1...8 {
            // Silence since the last activity for as long as the keep-alive: it fires.
            probe.timerFired(at: QUICInstant(nanoseconds: probe.lastActivity.nanoseconds + probe.appliedKeepAlive))
            #expect(probe.backoff == min(round, DatagramProbe.maxBackoff))
            if round <= DatagramProbe.maxBackoff {
                expected *= 2
                #expect(probe.keepAliveChange(pto: pto) == expected)
            } else {
                #expect(probe.keepAliveChange(pto: pto) == nil, "capped at 2^\(DatagramProbe.maxBackoff) PTOs")
            }
            // The PING went out.
            probe.noteActivity(at: QUICInstant(nanoseconds: probe.lastActivity.nanoseconds + probe.appliedKeepAlive))
        }
        #expect(probe.appliedKeepAlive == pto << UInt64(DatagramProbe.maxBackoff))
        // An acknowledgement resets the backoff.
        probe.datagramSent()
        probe.datagramResolved()
        #expect(probe.backoff == 0)
        #expect(probe.keepAliveChange(pto: pto) == pto)
    }

    @Test func expiryWithNothingInFlightDoesNotBackOff() {
        var probe = DatagramProbe(configuredKeepAlive: 1_000_000)
        probe.timerFired(at: at(milliseconds: 500))
        #expect(probe.backoff == 0)
    }

    @Test func theWindowKeepsAPacketOfRoomForThePing() {
        #expect(DatagramProbe.windowAllows(congestionWindowLeft: 2400, packetSize: 1200))
        #expect(!DatagramProbe.windowAllows(congestionWindowLeft: 2399, packetSize: 1200))
        #expect(!DatagramProbe.windowAllows(congestionWindowLeft: 0, packetSize: 1200))
    }
}
