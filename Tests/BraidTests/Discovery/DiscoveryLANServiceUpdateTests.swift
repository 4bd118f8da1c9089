import BraidCore
import Foundation
import Testing

@testable import Braid

/// Changing what a running listener advertises, between hosts in network namespaces
/// (`DiscoveryLAN`): a new TXT record is announced under the same name (RFC 6762 §8.4: the
/// browser on another host sees the new record and never loses the service), a service set on
/// a listener that started without one is advertised, and a service set from outside the
/// listener's host goes to the discovery the listener started with.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DiscoveryLANServiceUpdateTests {
    /// Whether `recorder` ever reported `name` removed.
    static func everRemoved(_ name: String, _ recorder: BrowseRecorder) -> Bool {
        recorder.changes.withLock { $0 }.contains { changes in
            changes.contains { if case .removed(let result) = $0, case .service(name, _, _, _) = result.endpoint { true } else { false } }
        }
    }

    static func txt(of name: String, _ recorder: BrowseRecorder) -> NWTXTRecord? {
        guard let result = recorder.result(named: name), case .bonjour(let txt) = result.metadata else { return nil }
        return txt
    }

    @Test func aNewTXTRecordIsAnnouncedWithoutWithdrawingTheService() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let type = uniqueServiceType()
            let advertised = try hosts[0].runNow {
                try AdvertisedEcho(NWListener.Service(name: "Table 7", type: type, txtRecord: NWTXTRecord(["players": "4"])))
            }
            hosts[0].cancelAtTeardown(advertised.listener)
            let browser = NWBrowser(for: .bonjourWithTXTRecord(type: type, domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            try await waitUntil("Table 7 with players=4 on the other host", describe: { "\(recorder.names)" }) {
                Self.txt(of: "Table 7", recorder)?["players"] == "4"
            }
            try await waitUntil("the registration", describe: { "\(advertised.registrations.withLock { $0 })" }) { advertised.addedNames == ["Table 7"] }

            hosts[0].runNow {
                advertised.listener.service = NWListener.Service(name: "Table 7", type: type, txtRecord: NWTXTRecord(["players": "5"]))
            }
            try await waitUntil("players=5 on the other host", describe: { "\(recorder.changes.withLock { $0 })" }) {
                Self.txt(of: "Table 7", recorder)?["players"] == "5"
            }
            #expect(!Self.everRemoved("Table 7", recorder), "the browser lost the service: \(recorder.changes.withLock { $0 })")
            // One registration, never withdrawn: the name stayed the listener's throughout.
            #expect(advertised.registrations.withLock { $0 } == [.add(.service(name: "Table 7", type: type, domain: "local.", interface: nil))])
            #expect(advertised.listener.service?.txtRecord == NWTXTRecord(["players": "5"]).data)
        }
    }

    @Test func aServiceSetOnARunningListenerWithoutOneIsAdvertised() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let type = uniqueServiceType()
            let listener = try NWListener(using: .tcp)
            let registrations = Locked<[NWListener.ServiceRegistrationChange]>([])
            listener.newConnectionHandler = { $0.cancel() }
            listener.serviceRegistrationUpdateHandler = { change in registrations.withLock { $0.append(change) } }
            hosts[0].runNow { listener.start(queue: .global()) }
            hosts[0].cancelAtTeardown(listener)
            try await waitUntil("the listener to be ready", describe: { "\(listener.state)" }) { listener.state == .ready }

            let browser = NWBrowser(for: .bonjour(type: type, domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            // Set from the test's own context: the listener's host serves it all the same.
            listener.service = NWListener.Service(name: "Late", type: type)
            try await waitUntil("Late on the other host", describe: { "\(recorder.names)" }) { recorder.names == ["Late"] }
            try await waitUntil("the registration", describe: { "\(registrations.withLock { $0 })" }) {
                registrations.withLock { $0 } == [.add(.service(name: "Late", type: type, domain: "local.", interface: nil))]
            }
        }
    }

    @Test func aServiceSetFromElsewhereGoesToTheDiscoveryTheListenerStartedWith() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let type = uniqueServiceType()
            let listener = try NetworkListener(for: .bonjour(name: "Before", type: type)) { TCP() }
            let changes = Locked<[NetworkListener<TCP>.ServiceRegistrationChange]>([])
            listener.onServiceRegistrationUpdate { _, change in changes.withLock { $0.append(change) } }
            let running = await hosts[0].run { Task { try await listener.run { _ in } } }
            hosts[0].cancelAtTeardown(running)
            let browser = NWBrowser(for: .bonjour(type: type, domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            try await waitUntil("Before on the other host", describe: { "\(recorder.names)" }) { recorder.names == ["Before"] }

            // Outside any host's environment: a back end looked up here would be the process's,
            // in the test's own namespace, which the other host never hears.
            listener.service = NWListener.Service(name: "After", type: type)
            try await waitUntil("After alone on the other host", describe: { "\(recorder.names)" }) { recorder.names == ["After"] }
            let endpoint: @Sendable (String) -> NWEndpoint = { name in .service(name: name, type: type, domain: "local.", interface: nil) }
            try await waitUntil("the listener's changes", describe: { "\(changes.withLock { $0 })" }) {
                changes.withLock { $0 } == [.add(endpoint("Before")), .remove(endpoint("Before")), .add(endpoint("After"))]
            }
        }
    }

    @Test func aServiceSetOnARunningNetworkListenerWithoutOneIsAdvertised() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let type = uniqueServiceType()
            let listener = NetworkListener(using: .parameters { TCP() })
            let changes = Locked<[NetworkListener<TCP>.ServiceRegistrationChange]>([])
            listener.onServiceRegistrationUpdate { _, change in changes.withLock { $0.append(change) } }
            let running = await hosts[0].run { Task { try await listener.run { _ in } } }
            hosts[0].cancelAtTeardown(running)
            try await waitUntil("the listener's port", describe: { "\(listener.state)" }) { listener.port != nil }

            let browser = NWBrowser(for: .bonjourWithTXTRecord(type: type, domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            listener.service = NWListener.Service(name: "Late", type: type, txtRecord: NWTXTRecord(["round": "1"]))
            try await waitUntil("Late on the other host", describe: { "\(recorder.names)" }) { Self.txt(of: "Late", recorder)?["round"] == "1" }
            listener.service = NWListener.Service(name: "Late", type: type, txtRecord: NWTXTRecord(["round": "2"]))
            try await waitUntil("round=2 on the other host", describe: { "\(recorder.changes.withLock { $0 })" }) {
                Self.txt(of: "Late", recorder)?["round"] == "2"
            }
            #expect(!Self.everRemoved("Late", recorder), "the browser lost the service: \(recorder.changes.withLock { $0 })")
            #expect(changes.withLock { $0 } == [.add(.service(name: "Late", type: type, domain: "local.", interface: nil))])
        }
    }
}
