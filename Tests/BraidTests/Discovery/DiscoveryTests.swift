import Braid
import BraidCore
import Dispatch
import Foundation
import Testing

/// Browsing and advertising between Braid instances in one process, over the host's real
/// multicast interfaces (each test with a service type of its own): a classic listener
/// advertised and found by `NWBrowser` and `NetworkBrowser`, connected to by name, renamed on
/// a conflict, gone from the browser after its goodbye; and what is not supported failing.
@Suite(.serialized, .timeLimit(.minutes(3))) struct DiscoveryTests {
    @Test func aBrowserFindsAnAdvertisedListenerAndConnectsByName() async throws {
        let type = uniqueServiceType()
        let advertised = try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type, txtRecord: NWTXTRecord(["players": "4"])))
        defer { advertised.listener.cancel() }
        let browser = NWBrowser(for: .bonjourWithTXTRecord(type: type, domain: nil), using: .tcp)
        let recorder = BrowseRecorder(browser)
        browser.start(queue: .global())
        defer { browser.cancel() }

        try await waitUntil("Table 7 with its TXT record", describe: { "results \(recorder.results.withLock { $0 })" }) {
            guard let result = recorder.result(named: "Table 7"), case .bonjour(let txt) = result.metadata else { return false }
            return txt["players"] == "4"
        }
        let result = try #require(recorder.result(named: "Table 7"))
        guard case .service(_, let foundType, let domain, let interface) = result.endpoint else { throw CancellationError() }
        #expect(foundType == type)
        #expect(domain == "local.")
        #expect(interface != nil)
        #expect(result.interfaces.count == 1)
        #expect(recorder.states.withLock { $0 }.contains(.ready))
        try await waitUntil("the registration") { advertised.addedNames == ["Table 7"] }

        // Connect by name: SRV, then the host's addresses, then the usual racing.
        let connection = NWConnection(to: result.endpoint, using: .tcp)
        let states = StateRecorder(connection)
        connection.start(queue: .global())
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("hello".utf8), isComplete: false) == nil)
        let echoed = await connection.receiveAsync(minimum: 5, maximum: 5)
        #expect(echoed.content == Data("hello".utf8))
        connection.cancel()

        // The listener's goodbye takes the service out of the browser's results.
        advertised.listener.cancel()
        try await waitUntil("the goodbye", deadline: .seconds(60), describe: { "results \(recorder.names)" }) {
            recorder.result(named: "Table 7") == nil
        }
        #expect(recorder.changes.withLock { $0 }.contains { $0.contains { if case .removed = $0 { true } else { false } } })
        try await waitUntil("the removal") {
            advertised.registrations.withLock { $0 }.contains { if case .remove(.service("Table 7", _, _, _)) = $0 { true } else { false } }
        }
    }

    @Test func aNameTakenOnTheNetworkIsRenamed() async throws {
        let type = uniqueServiceType()
        let first = try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type))
        defer { first.listener.cancel() }
        try await waitUntil("the first registration") { first.addedNames == ["Table 7"] }
        let second = try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type))
        defer { second.listener.cancel() }
        try await waitUntil("the second registration", describe: { "\(second.registrations.withLock { $0 })" }) {
            second.addedNames == ["Table 7 (2)"]
        }
        let browser = NWBrowser(for: .bonjour(type: type, domain: nil), using: .tcp)
        let recorder = BrowseRecorder(browser)
        browser.start(queue: .global())
        defer { browser.cancel() }
        try await waitUntil("both services", describe: { "\(recorder.names)" }) { recorder.names == ["Table 7", "Table 7 (2)"] }
        #expect(first.addedNames == ["Table 7"])
    }

    @Test func withoutAutomaticRenamingATakenNameFailsTheListener() async throws {
        let type = uniqueServiceType()
        let first = try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type))
        defer { first.listener.cancel() }
        try await waitUntil("the first registration") { first.addedNames == ["Table 7"] }
        var service = NWListener.Service(name: "Table 7", type: type)
        service.noAutoRename = true
        let second = try NWListener(service: service, using: .tcp)
        let states = Locked<[NWListener.State]>([])
        second.stateUpdateHandler = { state in states.withLock { $0.append(state) } }
        second.newConnectionHandler = { $0.cancel() }
        second.start(queue: .global())
        defer { second.cancel() }
        try await waitUntil("the name conflict", describe: { "\(states.withLock { $0 })" }) {
            states.withLock { $0 }.contains(.failed(.dns(-65548)))
        }
        #expect(first.addedNames == ["Table 7"])
    }

    @Test func networkBrowserRunFinishesWithAnEndpointAConnectionReaches() async throws {
        let type = uniqueServiceType()
        let advertised = try AdvertisedEcho(NWListener.Service(name: "Lobby", type: type))
        defer { advertised.listener.cancel() }
        let browser = NetworkBrowser(for: .bonjour(type: type, domain: nil))
        let endpoint = try await browser.run { services in
            services.isEmpty ? .continue : .finish(services[0].endpoint)
        }
        guard case .service("Lobby", type, "local.", _) = endpoint else {
            Issue.record("unexpected endpoint \(endpoint)")
            return
        }
        let connection = NetworkConnection(to: endpoint) { TCP() }
        try await connection.send(Data("ping".utf8))
        let reply = try await connection.receive(exactly: 4).content
        #expect(reply == Data("ping".utf8))
    }

    @Test func theTXTRecordComesWithBonjourEndpoints() async throws {
        let type = uniqueServiceType()
        let advertised = try AdvertisedEcho(NWListener.Service(name: "Txt", type: type, txtRecord: NWTXTRecord(["mode": "coop", "flag": ""])))
        defer { advertised.listener.cancel() }
        let txt = try await NetworkBrowser(for: .bonjour(type, domain: nil, includeTxtRecord: true)).run { services -> NetworkBrowser<Bonjour>.RunResult<NWTXTRecord> in
            guard let service = services.first, !service.txtRecord.isEmpty else { return .continue }
            return .finish(service.txtRecord)
        }
        #expect(txt["mode"] == "coop")
        #expect(txt.getEntry(for: "flag") == .empty)
    }

    @Test func aServiceNobodyAdvertisesFailsAsNotFound() async throws {
        let endpoint = NWEndpoint.service(name: "Nobody", type: uniqueServiceType(), domain: "local.", interface: nil)
        let connection = NetworkConnection(to: endpoint) { TCP() }
        await #expect {
            try await connection.send(Data("x".utf8))
        } throws: { error in
            guard let error = error as? NetworkError, case .dnsNameNotFound(let host) = error else { return false }
            return host.contains("Nobody") && host.contains("multicast DNS")
        }
    }

    @Test func otherDomainsAndBadTypesFailWithTheReason() async throws {
        for descriptor in [NWBrowser.Descriptor.bonjour(type: "_game._tcp", domain: "example.com."), .bonjour(type: "game", domain: nil)] {
            let browser = NWBrowser(for: descriptor, using: .tcp)
            let recorder = BrowseRecorder(browser)
            browser.start(queue: .global())
            try await waitUntil("failure for \(descriptor)") {
                recorder.states.withLock { $0 }.contains { if case .failed = $0 { true } else { false } }
            }
        }
        await #expect(throws: NetworkError.self) {
            try await NetworkBrowser(for: .bonjour(type: "_game._tcp", domain: "example.com.")).run { _ in .finish(()) }
        }
    }
}
