@testable import BraidDiscovery
import Testing

/// The responder's side of known-answer suppression across packets (RFC 6762 §7.2) and its
/// per-interface answers (§6.2), on a virtual clock: a truncated query waits 400–500 ms for
/// its known-answer parts from the same querier, bounded in queriers and answers kept; an
/// answer goes out on the interface its question came on; each interface's copy of a message
/// carries that interface's addresses alone.
@Suite struct MDNSResponderKnownAnswerTests {
    static let type = try! DNSName("_katest._tcp.local")

    /// A responder that has finished probing and announcing, and the time it did.
    static func registered(addresses: [DNSRecordData] = [.a([10, 0, 0, 1])]) -> (MDNSResponder, Duration) {
        var responder = MDNSResponder(
            service: MDNSServiceDescription(
                instance: Array("Table 7".utf8), serviceType: type, port: 4433, txt: [Array("k=v".utf8)],
                hostLabel: Array("host-a".utf8), addresses: addresses),
            now: .zero, seed: 11)
        var now = Duration.zero
        while let deadline = responder.nextDeadline {
            now = deadline
            _ = responder.pollOutgoing(now: now)
        }
        return (responder, now + .seconds(1))
    }

    static func querier(_ last: UInt8) -> MDNSSource { MDNSSource(address: [10, 0, 0, last], port: 5353) }

    static func answersPTR(_ outgoing: [MDNSResponder.Outgoing]) -> Bool {
        outgoing.contains { $0.message.answers.contains { $0.name == type && $0.data.type == .ptr } }
    }

    /// Polls at every deadline up to `end`, collecting what goes out.
    static func drain(_ responder: inout MDNSResponder, from start: Duration, until end: Duration) -> [MDNSResponder.Outgoing] {
        var out: [MDNSResponder.Outgoing] = []
        var now = start
        while let deadline = responder.nextDeadline, deadline <= end {
            now = max(now, deadline)
            out += responder.pollOutgoing(now: now)
        }
        return out
    }

    @Test func aTruncatedQueryWaitsForItsKnownAnswerParts() throws {
        var (responder, start) = Self.registered()
        let question = DNSQuestion(name: Self.type, type: .ptr)
        var truncated = DNSMessage(isResponse: false, questions: [question])
        truncated.isTruncated = true
        let known = DNSResourceRecord(name: Self.type, ttl: MDNSResponder.otherRecordTTL, data: .ptr(responder.instanceName))

        // Querier 1 sends its question with TC, then the part that knows the PTR record.
        #expect(responder.receive(truncated, now: start, from: Self.querier(1), interface: 2).isEmpty)
        let part = DNSMessage(isResponse: false, answers: [known])
        #expect(responder.receive(part, now: start + .milliseconds(100), from: Self.querier(1), interface: 2).isEmpty)
        // Querier 2 sends the same truncated question and no part.
        #expect(responder.receive(truncated, now: start, from: Self.querier(2), interface: 3).isEmpty)

        // Nothing before 400 ms: the parts may still come.
        #expect(responder.pollOutgoing(now: start + .milliseconds(399)).isEmpty)
        let out = Self.drain(&responder, from: start + .milliseconds(399), until: start + .seconds(2))
        // Querier 2 gets the PTR record, on its interface; querier 1 already knows it.
        let answered = out.filter { Self.answersPTR([$0]) }
        #expect(answered.count == 1)
        #expect(answered.first?.interface == 3)
        #expect(!out.contains { $0.interface == 2 && Self.answersPTR([$0]) })
    }

    @Test func aTruncatedPartExtendsTheWaitABoundedNumberOfTimes() {
        var (responder, start) = Self.registered()
        var truncated = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.type, type: .ptr)])
        truncated.isTruncated = true
        _ = responder.receive(truncated, now: start, from: Self.querier(1), interface: 2)
        var part = DNSMessage(isResponse: false, answers: [])
        part.isTruncated = true
        var now = start
        for _ in 0..<(MDNSResponder.maximumKnownAnswerParts + 4) {
            now += .milliseconds(300)
            _ = responder.receive(part, now: now, from: Self.querier(1), interface: 2)
        }
        // Each truncated part restarted the wait, up to the limit; then the answer went out.
        let waited = responder.waiting.values.first
        #expect(waited == nil || waited!.parts == MDNSResponder.maximumKnownAnswerParts)
        let out = Self.drain(&responder, from: now, until: now + .seconds(2))
        #expect(Self.answersPTR(out))
        #expect(responder.waiting.isEmpty)
    }

    @Test func waitingQueriesAndTheirKnownAnswersAreBounded() {
        var (responder, start) = Self.registered()
        var truncated = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.type, type: .ptr)])
        truncated.isTruncated = true
        for last in 1...UInt8(MDNSResponder.maximumWaitingQueries + 8) {
            _ = responder.receive(truncated, now: start, from: Self.querier(last), interface: 2)
        }
        #expect(responder.waiting.count == MDNSResponder.maximumWaitingQueries)
        // Queries beyond the limit are answered without waiting (shared records: shortly).
        #expect(responder.pendingAnswers[2]?.isEmpty == false)

        let filler = (0..<600).map { index in
            DNSResourceRecord(name: Self.type, ttl: 4500, data: .ptr(try! DNSName("fake\(index)._katest._tcp.local")))
        }
        _ = responder.receive(DNSMessage(isResponse: false, answers: filler), now: start, from: Self.querier(1), interface: 2)
        let kept = responder.waiting[MDNSResponder.Querier(address: [10, 0, 0, 1], port: 5353, interface: 2)]?.message.answers.count
        #expect(kept == MDNSResponder.maximumWaitingKnownAnswers)
    }

    @Test func eachInterfacesCopyCarriesItsOwnAddresses() throws {
        let (responder, _) = Self.registered(addresses: [.a([10, 0, 0, 1]), .a([10, 1, 0, 1]), .aaaa([0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1])])
        let all = DNSMessage(isResponse: true, isAuthoritative: true, answers: responder.allRecords)
        let second = try #require(responder.addressed(all, to: [.a([10, 1, 0, 1])]))
        let addresses = second.answers.filter { $0.name == responder.hostName }.map(\.data)
        #expect(addresses == [.a([10, 1, 0, 1])])
        // The other records stay.
        #expect(second.answers.contains { $0.data.type == .srv })
        #expect(second.answers.contains { $0.data.type == .ptr })
        // A message of nothing but another interface's address is not sent at all.
        let onlyFirst = DNSMessage(isResponse: true, answers: [DNSResourceRecord(name: responder.hostName, ttl: 120, data: .a([10, 0, 0, 1]))])
        #expect(responder.addressed(onlyFirst, to: [.a([10, 1, 0, 1])]) == nil)
    }

    @Test func aQuestionIsAnsweredOnTheInterfaceItCameOn() {
        var (responder, start) = Self.registered()
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: responder.instanceName, type: .srv)])
        let out = responder.receive(query, now: start, from: Self.querier(9), interface: 5)
        #expect(out.count == 1)
        #expect(out.first?.interface == 5)
        #expect(out.first?.message.answers.contains { $0.data.type == .srv } == true)
    }

    @Test func itsOwnProbeHeardOnAnotherInterfaceDoesNotHoldItBack() {
        var responder = MDNSResponder(
            service: MDNSServiceDescription(
                instance: Array("Two links".utf8), serviceType: Self.type, port: 4433, txt: [],
                hostLabel: Array("host-b".utf8), addresses: [.a([10, 0, 0, 1]), .a([10, 1, 0, 1])]),
            now: .zero, seed: 12)
        var registered = false
        while !registered, let deadline = responder.nextDeadline, deadline < .seconds(10) {
            for outgoing in responder.pollOutgoing(now: deadline) where !outgoing.message.isResponse {
                // Multicast loopback: the copy sent on the second link comes back.
                if let copy = responder.addressed(outgoing.message, to: [.a([10, 1, 0, 1])]) {
                    _ = responder.receive(copy, now: deadline, from: Self.querier(1), interface: 2)
                }
            }
            registered = responder.takeEvents().contains(.registered(instance: Array("Two links".utf8)))
        }
        #expect(registered)
    }
}
