@testable import Braid
import BraidCore
import BraidDiscoveryIO
import Dispatch
import Foundation
import Testing

/// What advertising refuses, and how names are cut: a TXT record too large for a packet, a
/// service that cannot be advertised failing its listener, host labels within 63 bytes.
@Suite(.timeLimit(.minutes(2))) struct DiscoveryLimitsTests {
    @Test func aTXTRecordTooLargeForAPacketIsRefused() throws {
        var entries: [String: String] = [:]
        for index in 0..<40 { entries["key\(index)"] = String(repeating: "v", count: 240) }
        let service = NWListener.Service(name: "Big", type: uniqueServiceType(), txtRecord: NWTXTRecord(entries))
        #expect {
            _ = try NWListener(service: service, using: .tcp)
        } throws: { error in
            guard let error = error as? NetworkError, case .invalidConfiguration(let reason) = error else { return false }
            return reason.contains("TXT")
        }
    }

    @Test func aServiceThatCannotBeAdvertisedFailsTheListener() async throws {
        let listener = try NWListener(using: .tcp)
        listener.service = NWListener.Service(name: "Bad", type: "not-a-type")
        let states = Locked<[NWListener.State]>([])
        listener.stateUpdateHandler = { state in states.withLock { $0.append(state) } }
        listener.newConnectionHandler = { $0.cancel() }
        listener.start(queue: .global())
        defer { listener.cancel() }
        try await waitUntil("the listener's failure", describe: { "states \(states.withLock { $0 })" }) {
            states.withLock { $0.contains { if case .failed = $0 { true } else { false } } }
        }
    }

    @Test func hostLabelsAreCutAtACharacterWithin63Bytes() {
        for base in [String(repeating: "é", count: 40), String(repeating: "a", count: 70), "short", String(repeating: "👍", count: 20)] {
            let label = DiscoveryRuntime.hostLabel(base: base, suffix: "ffffffff")
            #expect(label.count <= 63)
            let text = String(decoding: label, as: UTF8.self)
            #expect(Array(text.utf8) == label)
            #expect(text.hasSuffix("-braid-ffffffff"))
            #expect(base.hasPrefix(String(text.dropLast("-braid-ffffffff".count))))
        }
    }
}

/// A browser dropped without `cancel()` stops browsing.
@Suite(.timeLimit(.minutes(2))) struct NWBrowserLifetimeTests {
    @Test func aDroppedBrowserStopsBrowsing() async throws {
        var browser: NWBrowser? = NWBrowser(for: .bonjour(type: uniqueServiceType(), domain: nil), using: .tcp)
        browser!.start(queue: .global())
        let (discovery, id) = try #require(browser!.browsing)
        #expect(await discovery.isBrowsing(id))
        browser = nil
        let end = ContinuousClock.now + .seconds(60)
        while await discovery.isBrowsing(id), ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        #expect(await discovery.isBrowsing(id) == false)
    }
}
