@testable import BraidDiscovery
import Testing

/// A browser whose cache holds over a thousand fake instances (announced, never answering):
/// its queries stay within the budget and a real instance is still found and resolved.
@Suite struct MDNSBrowserFloodTests {
    @Test func queriesStayWithinTheBudgetAndARealInstanceResolves() throws {
        let type = MDNSEngineTests.type
        var responder = MDNSResponder(service: MDNSEngineTests.service("Real"), now: .zero, seed: 21)
        var now = Duration.zero
        // The real responder has announced before the browser starts, so only queries find it.
        while !responder.isRegistered || responder.nextDeadline != nil {
            now = max(now, responder.nextDeadline ?? now)
            _ = responder.poll(now: now)
            now += .milliseconds(1)
        }
        var browser = MDNSBrowser(serviceType: type, now: now)
        for batch in 0..<11 {
            var flood = DNSMessage(isResponse: true)
            for index in 0..<100 {
                let fake = try DNSName(prefix: Array("fake-\(batch)-\(index)".utf8), type)
                flood.answers.append(DNSResourceRecord(name: type, ttl: 4500, data: .ptr(fake)))
            }
            browser.receive(flood, interface: 1, now: now)
        }
        #expect(browser.results().count == 1100)

        let end = now + .seconds(60)
        var queries = 0
        var largest = 0
        func resolved() -> Bool {
            browser.results().contains { $0.instance == Array("Real".utf8) && $0.port == 4433 && !$0.addresses.isEmpty }
        }
        while now < end, !resolved() {
            now = max(now, min(browser.nextDeadline, responder.nextDeadline ?? end))
            var queue = browser.poll(now: now)
            queries += queue.count
            for query in queue { largest = max(largest, query.serialized().count) }
            queue += responder.poll(now: now)
            while !queue.isEmpty {
                let message = queue.removeFirst()
                guard let heard = try? DNSMessage(parsing: message.serialized()) else { continue }
                queue += responder.receive(heard, now: now).map(\.message)
                browser.receive(heard, interface: 1, now: now)
            }
            now += .milliseconds(1)
        }
        #expect(queries > 1)
        #expect(largest <= MDNSBrowser.queryBudget)
        #expect(resolved())
    }

    @Test func knownAnswersThatDoNotFitFollowAfterTheTCBit() throws {
        let type = MDNSEngineTests.type
        var browser = MDNSBrowser(serviceType: type, now: .zero)
        var flood = DNSMessage(isResponse: true)
        for index in 0..<100 {
            flood.answers.append(DNSResourceRecord(name: type, ttl: 4500, data: .ptr(try DNSName(prefix: Array("known-\(index)".utf8), type))))
        }
        browser.receive(flood, interface: 1, now: .zero)
        // The first PTR query after the flood lists what is known.
        var queries: [DNSMessage] = []
        var now = Duration.zero
        while !queries.contains(where: { $0.questions.contains { $0.name == type && $0.type == .ptr } && !$0.answers.isEmpty }) {
            now = max(now, browser.nextDeadline)
            queries = browser.poll(now: now)
            now += .milliseconds(1)
        }
        let first = try #require(queries.firstIndex { $0.questions.contains { $0.name == type && $0.type == .ptr } })
        #expect(queries[first].isTruncated)
        #expect(queries.allSatisfy { $0.serialized().count <= MDNSBrowser.queryBudget })
        let continued = queries[(first + 1)...].prefix { $0.questions.isEmpty }
        #expect(!continued.isEmpty)
        #expect(continued.dropLast().allSatisfy { $0.isTruncated })
        let listed = queries[first].answers.count + continued.map(\.answers.count).reduce(0, +)
        #expect(listed == 100)
    }
}
