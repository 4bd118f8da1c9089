import Braid
import BraidCore
import Foundation
import Testing

/// Advertising in the new API: `NetworkListener(for: .bonjour(...))`, its
/// `onServiceRegistrationUpdate` events, a new `service` replacing the advertised one, and a
/// service that cannot be advertised failing at once; over the host's multicast interfaces,
/// each test with a service type of its own.
@Suite(.serialized, .timeLimit(.minutes(3))) struct BonjourListenerTests {
    /// What a new-API listener reported of its advertisement.
    final class Registrations: Sendable {
        let changes = Locked<[NetworkListener<TLS>.ServiceRegistrationChange]>([])

        var added: [String] {
            changes.withLock { changes in changes.compactMap { if case .add(.service(let name, _, _, _)) = $0 { name } else { nil } } }
        }

        var removed: [String] {
            changes.withLock { changes in changes.compactMap { if case .remove(.service(let name, _, _, _)) = $0 { name } else { nil } } }
        }
    }

    @Test func aBonjourListenerIsFoundWithItsTXTRecordAndReachedByNameOverTLS() async throws {
        let type = uniqueServiceType()
        let listener = try NetworkListener(for: .bonjour(name: "Table 7", type: type, txtRecord: NWTXTRecord(["players": "4"]))) {
            testTLSServer()
        }
        let registrations = Registrations()
        listener.onServiceRegistrationUpdate { _, change in registrations.changes.withLock { $0.append(change) } }
        let running = Task {
            try await listener.run { connection in
                let request = try await connection.receive(exactly: 5).content
                try await connection.send(request)
            }
        }

        let found = try await NetworkBrowser(for: .bonjour(type, domain: nil, includeTxtRecord: true)).run { services -> NetworkBrowser<Bonjour>.RunResult<Bonjour.Endpoint> in
            guard let service = services.first(where: { if case .service("Table 7", _, _, _) = $0.endpoint { true } else { false } }),
                  service.txtRecord["players"] == "4"
            else { return .continue }
            return .finish(service)
        }
        try await waitUntil("the add event", describe: { "\(registrations.changes.withLock { $0 })" }) { registrations.added == ["Table 7"] }

        let connection = NetworkConnection(to: found.endpoint) { testTLSClient() }
        try await connection.send(Data("hello".utf8))
        #expect(try await connection.receive(exactly: 5).content == Data("hello".utf8))
        await connection.close()

        // Leaving `run` withdraws the service: goodbye, and the remove event.
        running.cancel()
        _ = await running.result
        #expect(registrations.removed == ["Table 7"])
        #expect(listener.state == .cancelled)
    }

    @Test func aNewServiceReplacesTheAdvertisedOne() async throws {
        let type = uniqueServiceType()
        let listener = try NetworkListener(for: .bonjour(name: "Before", type: type)) { testTLSServer() }
        let registrations = Registrations()
        listener.onServiceRegistrationUpdate { _, change in registrations.changes.withLock { $0.append(change) } }
        let running = Task { try await listener.run { _ in } }
        defer { running.cancel() }
        try await waitUntil("the first name", describe: { "\(registrations.changes.withLock { $0 })" }) { registrations.added == ["Before"] }

        let browser = NWBrowser(for: .bonjourWithTXTRecord(type: type, domain: nil), using: .tcp)
        let recorder = BrowseRecorder(browser)
        browser.start(queue: .global())
        defer { browser.cancel() }
        // (One result per interface the service is heard on.)
        try await waitUntil("Before in the browser", describe: { "\(recorder.names)" }) { Set(recorder.names) == ["Before"] }

        listener.service = NWListener.Service(name: "After", type: type, txtRecord: NWTXTRecord(["round": "2"]))
        try await waitUntil("the rename events", describe: { "\(registrations.changes.withLock { $0 })" }) {
            registrations.removed == ["Before"] && registrations.added == ["Before", "After"]
        }
        // The old name's goodbye and the new name's announcement reach the browser.
        try await waitUntil("After alone in the browser", describe: { "\(recorder.names)" }) {
            guard Set(recorder.names) == ["After"], let result = recorder.result(named: "After"), case .bonjour(let txt) = result.metadata else { return false }
            return txt["round"] == "2"
        }
    }

    @Test func aServiceThatCannotBeAdvertisedThrowsAtOnce() throws {
        #expect(throws: NetworkError.self) {
            _ = try NetworkListener(for: .bonjour(name: "x", type: "game")) { testTLSServer() }
        }
        #expect(throws: NetworkError.self) {
            _ = try NetworkListener(for: .bonjour(name: String(repeating: "n", count: 64), type: "_game._tcp")) { testTLSServer() }
        }
        do {
            _ = try NetworkListener(for: .bonjour(type: "_game._tcp", domain: "example.com.")) { testTLSServer() }
            Issue.record("a domain other than local. was accepted")
        } catch let error as NetworkError {
            guard case .unsupported(let what) = error else { throw error }
            #expect(what.contains("example.com"))
        }
    }

    @Test func withoutAutomaticRenamingATakenNameEndsRunWithTheReason() async throws {
        let type = uniqueServiceType()
        let first = try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type))
        defer { first.listener.cancel() }
        try await waitUntil("the first registration") { first.addedNames == ["Table 7"] }
        var service = NWListener.Service(name: "Table 7", type: type)
        service.noAutoRename = true
        let provider = BonjourListenerProvider(name: "Table 7", type: type)
        let second = try NetworkListener(for: provider) { testTLSServer() }
        second.service = service
        do {
            try await second.run { _ in }
            Issue.record("run returned although the name was taken")
        } catch let error as NetworkError {
            guard case .dnsFailure(let host, let message) = error else { throw error }
            #expect(host.hasPrefix("Table 7."))
            #expect(message.contains("noAutoRename"))
        }
        guard case .failed = second.state else {
            Issue.record("state \(second.state)")
            return
        }
    }
}
