@testable import BraidDiscovery
import Testing

/// The browser and responder engines against each other in memory, on a virtual clock, with a
/// wire that delivers every multicast message to everyone (the sender included, as multicast
/// loopback does).
@Suite struct MDNSEngineTests {
    static let type = try! DNSName("_enginetest._tcp.local")

    static func service(_ name: String, host: String = "host-a", port: UInt16 = 4433, txt: [String] = ["k=v"]) -> MDNSServiceDescription {
        MDNSServiceDescription(
            instance: Array(name.utf8), serviceType: type, port: port, txt: txt.map { Array($0.utf8) },
            hostLabel: Array(host.utf8), addresses: [.a([10, 0, 0, 1])])
    }

    /// Everyone on one link: responders and browsers, stepped to each deadline in turn.
    struct Link {
        var responders: [MDNSResponder] = []
        var browsers: [MDNSBrowser] = []
        var now = Duration.zero
        var delivered: [DNSMessage] = []
        /// Drops everything sent while false (a link that is down).
        var up = true

        mutating func deliver(_ messages: [DNSMessage]) {
            var queue = messages
            while !queue.isEmpty {
                let message = queue.removeFirst()
                guard up else { continue }
                // Through the wire format, as a socket would carry it.
                let heard = try! DNSMessage(parsing: message.serialized())
                delivered.append(heard)
                for index in responders.indices {
                    queue += responders[index].receive(heard, now: now).map(\.message)
                }
                for index in browsers.indices { browsers[index].receive(heard, interface: 1, now: now) }
            }
        }

        /// Runs until `end`, polling everyone at each deadline.
        mutating func run(until end: Duration) {
            while now < end {
                var deadlines = responders.compactMap(\.nextDeadline) + browsers.map(\.nextDeadline)
                deadlines.append(end)
                now = max(now, deadlines.min()!)
                var out: [DNSMessage] = []
                for index in responders.indices { out += responders[index].poll(now: now) }
                for index in browsers.indices { out += browsers[index].poll(now: now) }
                deliver(out)
                if out.isEmpty, deadlines.min()! <= now { now += .milliseconds(1) }
            }
        }
    }

    /// RFC 6762 §8.4: a new TXT record is announced under the same name, with the cache-flush
    /// bit; no probe, no goodbye, and the browser's result carries the new record at once.
    @Test func aNewTXTRecordIsAnnouncedWithoutAProbeOrAGoodbye() throws {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Table 7", txt: ["round=1"]), now: .zero, seed: 1)]
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: .zero)]
        link.run(until: .seconds(5))
        #expect(link.browsers[0].results().first?.txt == [Array("round=1".utf8)])
        _ = link.responders[0].takeEvents()
        link.delivered = []

        link.responders[0].update(txt: [Array("round=2".utf8)], now: link.now)
        link.run(until: link.now + .milliseconds(1))
        #expect(link.browsers[0].results().first?.txt == [Array("round=2".utf8)])
        link.run(until: link.now + .seconds(5))
        #expect(link.browsers[0].results().map(\.txt) == [[Array("round=2".utf8)]])
        let instance = link.responders[0].instanceName
        let sent = link.delivered
        #expect(!sent.contains { !$0.isResponse && !$0.authorities.isEmpty }, "a probe went out")
        #expect(!sent.contains { $0.answers.contains { $0.ttl == 0 } }, "a goodbye went out")
        let announced = sent.filter { $0.isResponse }.flatMap(\.answers).filter { $0.name == instance && $0.data.type == .txt }
        #expect(announced.count >= 2)
        #expect(announced.allSatisfy { $0.cacheFlush && $0.data == .txt([Array("round=2".utf8)]) })
        #expect(link.responders[0].takeEvents().isEmpty)
    }

    @Test func aBrowserFindsAnAdvertisedServiceResolved() throws {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Table 7"), now: .zero, seed: 1)]
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: .zero)]
        link.run(until: .seconds(5))
        #expect(link.responders[0].takeEvents() == [.registered(instance: Array("Table 7".utf8))])
        let results = link.browsers[0].results()
        #expect(results.count == 1)
        let result = try #require(results.first)
        #expect(result.instance == Array("Table 7".utf8))
        #expect(result.port == 4433)
        #expect(result.host == (try DNSName("host-a.local")))
        #expect(result.txt == [Array("k=v".utf8)])
        #expect(result.addresses == [.a([10, 0, 0, 1])])
    }

    @Test func probesComeBeforeAnnouncements() {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Probed"), now: .zero, seed: 2)]
        link.run(until: .seconds(3))
        let mine = link.delivered
        let probes = mine.filter { !$0.isResponse && !$0.authorities.isEmpty }
        let announcements = mine.filter { $0.isResponse }
        #expect(probes.count == 3)
        #expect(announcements.count == 2)
        #expect(mine.firstIndex { $0.isResponse }! > mine.lastIndex { !$0.isResponse && !$0.authorities.isEmpty }!)
        #expect(announcements.allSatisfy { $0.answers.contains { $0.cacheFlush } && $0.answers.contains { !$0.cacheFlush } })
    }

    @Test func aNameConflictRenamesTheLaterService() {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Table 7", host: "host-a"), now: .zero, seed: 3)]
        link.run(until: .seconds(3))
        #expect(link.responders[0].isRegistered)
        // A second host starts later with the same instance name and another port.
        link.responders.append(MDNSResponder(service: Self.service("Table 7", host: "host-b", port: 9999), now: link.now, seed: 4))
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: link.now)]
        link.run(until: .seconds(8))
        #expect(link.responders[0].service.instance == Array("Table 7".utf8))
        #expect(link.responders[1].service.instance == Array("Table 7 (2)".utf8))
        #expect(link.responders[1].takeEvents() == [
            .renamed(from: Array("Table 7".utf8), to: Array("Table 7 (2)".utf8)),
            .registered(instance: Array("Table 7 (2)".utf8)),
        ])
        let names = link.browsers[0].results().map { String(decoding: $0.instance, as: UTF8.self) }
        #expect(names == ["Table 7", "Table 7 (2)"])
        #expect(link.browsers[0].results().map(\.port) == [4433, 9999])
    }

    @Test func simultaneousProbesAreSettledByTheTieBreak() {
        var link = Link()
        link.responders = [
            MDNSResponder(service: Self.service("Same", host: "host-a", port: 1000), now: .zero, seed: 5),
            MDNSResponder(service: Self.service("Same", host: "host-b", port: 2000), now: .zero, seed: 6),
        ]
        link.run(until: .seconds(10))
        let instances = Set(link.responders.map { String(decoding: $0.service.instance, as: UTF8.self) })
        #expect(instances == ["Same", "Same (2)"])
        #expect(link.responders.allSatisfy { $0.isRegistered })
        // The later record set (port 2000 sorts after 1000) keeps the name.
        #expect(link.responders[1].service.instance == Array("Same".utf8))
    }

    @Test func aGoodbyeRemovesTheServiceWithinASecond() {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Leaving"), now: .zero, seed: 7)]
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: .zero)]
        link.run(until: .seconds(4))
        #expect(link.browsers[0].results().count == 1)
        let goodbye = link.responders[0].goodbye()
        #expect(goodbye?.answers.allSatisfy { $0.ttl == 0 } == true)
        link.deliver([goodbye!])
        let said = link.now
        link.run(until: said + .seconds(1) + .milliseconds(1))
        #expect(link.browsers[0].results().isEmpty)
    }

    @Test func aSilentHostDropsOutAfterItsTTL() {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Vanishing"), now: .zero, seed: 8)]
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: .zero)]
        link.run(until: .seconds(4))
        #expect(link.browsers[0].results().count == 1)
        link.up = false
        link.run(until: .seconds(4) + .seconds(Int64(MDNSResponder.otherRecordTTL)) + .seconds(1))
        #expect(link.browsers[0].results().isEmpty)
        #expect(link.browsers[0].cachedRecordCount == 0)
    }

    @Test func queriesCarryKnownAnswersAndTheResponderHoldsBack() throws {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Known"), now: .zero, seed: 9)]
        link.browsers = [MDNSBrowser(serviceType: Self.type, now: .zero)]
        link.run(until: .seconds(20))
        let queries = link.delivered.filter { !$0.isResponse && $0.questions.contains { $0.type == .ptr } }
        let withKnown = try #require(queries.last)
        #expect(withKnown.answers.contains { $0.name == Self.type && $0.data.type == .ptr })
        // The responder does not answer a query that already knows its PTR record.
        var responder = link.responders[0]
        let answers = responder.receive(withKnown, now: link.now)
        #expect(answers.isEmpty)
        #expect(responder.poll(now: link.now + .seconds(1)).allSatisfy { !$0.answers.contains { $0.data.type == .ptr } })
    }

    @Test func queryIntervalsBackOff() {
        var browser = MDNSBrowser(serviceType: Self.type, now: .zero)
        var times: [Duration] = []
        var now = Duration.zero
        while times.count < 6 {
            now = browser.nextDeadline
            if !browser.poll(now: now).isEmpty { times.append(now) }
        }
        #expect(times == [.zero, .seconds(1), .seconds(3), .seconds(7), .seconds(15), .seconds(31)])
    }

    @Test func aLegacyUnicastQueryGetsAUnicastAnswerWithItsID() throws {
        var link = Link()
        link.responders = [MDNSResponder(service: Self.service("Legacy"), now: .zero, seed: 10)]
        link.run(until: .seconds(3))
        let query = DNSMessage(id: 4242, isResponse: false, questions: [DNSQuestion(name: Self.type, type: .ptr)])
        let out = link.responders[0].receive(query, now: link.now, fromPort: 40000)
        let answer = try #require(out.first)
        #expect(answer.unicastToSender)
        #expect(answer.message.id == 4242)
        #expect(answer.message.questions == query.questions)
        #expect(answer.message.records.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
        #expect(answer.message.additionals.contains { $0.data.type == .srv })
    }

    @Test func aFloodOfFakeServicesStaysWithinTheCache() throws {
        var browser = MDNSBrowser(serviceType: Self.type, now: .zero, cacheCapacity: 256)
        for batch in 0..<50 {
            var message = DNSMessage(isResponse: true)
            for index in 0..<40 {
                let instance = try DNSName(prefix: Array("fake-\(batch)-\(index)".utf8), Self.type)
                message.answers.append(DNSResourceRecord(name: Self.type, ttl: 4500, data: .ptr(instance)))
            }
            browser.receive(message, interface: 1, now: .seconds(Int64(batch)))
            #expect(browser.cachedRecordCount <= 256)
        }
        #expect(browser.results().count <= 256)
        #expect(browser.results().count > 200)
    }

    @Test func longNamesAreCutAtACharacterWhenRenamed() {
        let base = Array(String(repeating: "é", count: 31).utf8) + [0x61]
        let renamed = MDNSResponder.numbered(base, suffix: " (2)")
        #expect(renamed.count <= 63)
        #expect(String(validating: renamed, as: UTF8.self) != nil)
        #expect(String(decoding: renamed, as: UTF8.self).hasSuffix("é (2)"))
    }
}
