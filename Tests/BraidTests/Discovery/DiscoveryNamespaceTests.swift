import BraidCore
import BraidDiscovery
import BraidPerf
import Foundation
import Testing

@testable import Braid

/// Discovery between hosts: each host a network namespace of its own on one bridged link
/// (`DiscoveryLAN`), with its own loop and multicast DNS. A service advertised on one host is
/// found from another and reached by name over TLS and QUIC; two hosts claiming one name end
/// with one renamed; a listener's goodbye removes its service; a host whose link goes down
/// leaves the browser's results when its records' TTL runs out; Python's zeroconf in a third
/// namespace finds a Braid service.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DiscoveryNamespaceTests {
    /// What a browser on one host saw.
    final class Seen: Sendable {
        let results = Locked<[Bonjour.Endpoint]>([])
        var names: [String] {
            results.withLock { $0.compactMap { if case .service(let name, _, _, _) = $0.endpoint { name } else { nil } }.sorted() }
        }
    }

    @Test func aServiceOnOneHostIsReachedByNameFromAnotherOverTLSAndQUIC() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let (server, client) = (hosts[0], hosts[1])
            let tls = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "4"]))) {
                testTLSServer()
            }
            let quic = try NetworkListener(for: .bonjour(name: "Table 7", type: "_game._udp")) {
                testServer()
            }
            let tlsTask = await server.run {
                Task {
                    try await tls.run { connection in
                        let request = try await connection.receive(exactly: 5).content
                        try await connection.send(request)
                    }
                }
            }
            let quicTask = await server.run { Task { try await quic.run(echo) } }
            server.cancelAtTeardown(tlsTask)
            server.cancelAtTeardown(quicTask)

            let found = try await client.run {
                try await NetworkBrowser(for: .bonjour("_game._tcp", domain: nil, includeTxtRecord: true)).run { services -> NetworkBrowser<Bonjour>.RunResult<Bonjour.Endpoint> in
                    guard let service = services.first, service.txtRecord["players"] == "4" else { return .continue }
                    return .finish(service)
                }
            }
            guard case .service("Table 7", "_game._tcp", "local.", let interface) = found.endpoint else {
                Issue.record("found \(found.endpoint)")
                return
            }
            #expect(interface?.name == "eth0")
            try await client.run {
                let connection = NetworkConnection(to: found.endpoint) { testTLSClient() }
                try await connection.send(Data("hello".utf8))
                #expect(try await connection.receive(exactly: 5).content == Data("hello".utf8))
                await connection.close()
            }

            let quicEndpoint = NWEndpoint.service(name: "Table 7", type: "_game._udp", domain: "local.", interface: nil)
            try await client.run {
                let connection = NetworkConnection(to: quicEndpoint) { testClient() }
                let stream = try await connection.openStream()
                try await stream.send(Data("over quic".utf8), endOfStream: true)
                let (reply, _) = try await stream.receive(atLeast: 9, atMost: 9)
                #expect(reply == Data("over quic".utf8))
                await connection.close()
            }
        }
    }

    @Test func twoHostsClaimingOneNameEndWithOneRenamed() async throws {
        try await DiscoveryLAN.with(hosts: 3) { hosts in
            let first = try hosts[0].runNow { try AdvertisedEcho(NWListener.Service(name: "Table 7", type: "_game._tcp")) }
            hosts[0].cancelAtTeardown(first.listener)
            try await waitUntil("the first registration", describe: { "\(first.registrations.withLock { $0 })" }) { first.addedNames == ["Table 7"] }
            let second = try hosts[1].runNow { try AdvertisedEcho(NWListener.Service(name: "Table 7", type: "_game._tcp")) }
            hosts[1].cancelAtTeardown(second.listener)
            try await waitUntil("the second registration", describe: { "\(second.registrations.withLock { $0 })" }) {
                second.addedNames == ["Table 7 (2)"]
            }
            #expect(first.addedNames == ["Table 7"])

            let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[2].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            try await waitUntil("both names on the third host", describe: { "\(recorder.names)" }) { recorder.names == ["Table 7", "Table 7 (2)"] }
        }
    }

    @Test func aCancelledListenersGoodbyeRemovesItsServiceFromTheBrowser() async throws {
        // The standard TTLs (75 minutes for the PTR record): only the goodbye can remove the
        // service within the test's deadline.
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let advertised = try hosts[0].runNow { try AdvertisedEcho(NWListener.Service(name: "Table 7", type: "_game._tcp")) }
            hosts[0].cancelAtTeardown(advertised.listener)
            let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            try await waitUntil("Table 7 on the other host", describe: { "\(recorder.names)" }) { recorder.names == ["Table 7"] }

            advertised.listener.cancel()
            try await waitUntil("the removal", deadline: .seconds(60), describe: { "\(recorder.changes.withLock { $0 })" }) {
                recorder.changes.withLock { $0 }.contains { changes in
                    changes.contains { if case .removed(let result) = $0, case .service("Table 7", _, _, _) = result.endpoint { true } else { false } }
                }
            }
            #expect(recorder.names.isEmpty)
        }
    }

    @Test func aHostWhoseLinkGoesDownLeavesOnceItsRecordsExpire() async throws {
        // Short TTLs (3 s): a host that vanished without a goodbye leaves within the deadline.
        try await DiscoveryLAN.with(hosts: 2, recordTTLs: MDNSResponder.RecordTTLs(host: 3, other: 3)) { hosts in
            let advertised = try hosts[0].runNow { try AdvertisedEcho(NWListener.Service(name: "Table 7", type: "_game._tcp")) }
            hosts[0].cancelAtTeardown(advertised.listener)
            let browser = NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp)
            let recorder = BrowseRecorder(browser)
            hosts[1].runNow { browser.start(queue: .global()) }
            defer { browser.cancel() }
            try await waitUntil("Table 7 on the other host", describe: { "\(recorder.names)" }) { recorder.names == ["Table 7"] }

            // The advertiser's link goes down: no goodbye can leave it.
            _ = try await hosts[0].namespace.setLink("eth0", up: false)
            try await waitUntil("the expiry", deadline: .seconds(60), describe: { "\(recorder.names)" }) {
                recorder.changes.withLock { $0 }.contains { changes in
                    changes.contains { if case .removed(let result) = $0, case .service("Table 7", _, _, _) = result.endpoint { true } else { false } }
                }
            }
            #expect(recorder.names.isEmpty)
            #expect(advertised.registrations.withLock { $0 }.allSatisfy { if case .add = $0 { true } else { false } })
        }
    }

    @Test func zeroconfOnAnotherHostFindsABraidService() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let advertised = try hosts[0].runNow {
                try AdvertisedEcho(NWListener.Service(name: "Braid Table", type: "_game._tcp", txtRecord: NWTXTRecord(["players": "3"])))
            }
            hosts[0].cancelAtTeardown(advertised.listener)
            let script = PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/zeroconf_peer.py").path
            let peer = try ChildProcess("/usr/sbin/ip", ["netns", "exec", hosts[1].namespace.name, try PeerProcess.aioquicPython, script, "browse", "_game._tcp"])
            hosts[1].atTeardown { await peer.stop() }
            let added = try await peer.jsonLine(within: 90) { $0["event"] as? String == "added" && $0["port"] != nil }
            #expect(added["name"] as? String == "Braid Table._game._tcp.local.")
            #expect(added["port"] as? Int == Int(advertised.listener.port?.rawValue ?? 0))
            #expect((added["addresses"] as? [String]) == [hosts[0].address])
            advertised.listener.cancel()
            let removed = try await peer.jsonLine(within: 60) { $0["event"] as? String == "removed" }
            #expect(removed["name"] as? String == "Braid Table._game._tcp.local.")
        }
    }

    @Test func aRenumberedHostIsResolvedToItsNewAddress() async throws {
        try await DiscoveryLAN.with(hosts: 2) { hosts in
            let advertised = try hosts[0].runNow { try AdvertisedEcho(NWListener.Service(name: "Renumbered", type: "_game._tcp")) }
            hosts[0].cancelAtTeardown(advertised.listener)
            try await waitUntil("the registration", describe: { "\(advertised.registrations.withLock { $0 })" }) { advertised.addedNames == ["Renumbered"] }
            let endpoint = NWEndpoint.service(name: "Renumbered", type: "_game._tcp", domain: "local.", interface: nil)
            let before = try await hosts[1].run { try await ServiceResolver.addresses(for: endpoint) }
            #expect(before.map(\.ipString) == ["10.77.0.1"])

            // The advertiser's link gets another address (the old one goes first: deleting a
            // primary address deletes its subnet's secondaries with it).
            try await hosts[0].namespace.ip("address", "del", "10.77.0.1/24", "dev", "eth0")
            try await hosts[0].namespace.ip("address", "add", "10.77.0.11/24", "dev", "eth0")
            let end = ContinuousClock.now + .seconds(90)
            var after: [String] = []
            while ContinuousClock.now < end {
                after = (try? await hosts[1].run { try await ServiceResolver.addresses(for: endpoint) })?.map(\.ipString) ?? []
                if after == ["10.77.0.11"] { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(after == ["10.77.0.11"])
        }
    }
}
