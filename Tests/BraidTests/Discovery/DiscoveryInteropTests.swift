@testable import Braid
import BraidCore
import BraidPerf
import Foundation
import Testing

/// Braid's discovery against Python's zeroconf (PyPI, pinned in tools/install-deps.sh), an
/// independent mDNS/DNS-SD implementation, both ways (`Tests/Interop/peers/zeroconf_peer.py`):
/// zeroconf's service found by `NWBrowser` with its port and TXT record; Braid's advertised
/// listener found by zeroconf, resolved to its port and TXT record, and gone after the goodbye.
@Suite(.serialized, .timeLimit(.minutes(3))) struct DiscoveryInteropTests {
    static func peer(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try PeerProcess.aioquicPython, [PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/zeroconf_peer.py").path] + arguments)
    }

    @Test func braidFindsAZeroconfService() async throws {
        let type = uniqueServiceType()
        let peer = try Self.peer(["register", type, "Zeroconf Table", "4711", "players=2"])
        defer { Task { await peer.stop() } }
        _ = try await peer.jsonLine(within: 90) { $0["registered"] != nil }
        let browser = NWBrowser(for: .bonjourWithTXTRecord(type: type, domain: nil), using: .tcp)
        let recorder = BrowseRecorder(browser)
        browser.start(queue: .global())
        defer { browser.cancel() }
        try await waitUntil("zeroconf's service", describe: { "\(recorder.results.withLock { $0 }); peer: \(peer.errors)" }) {
            guard let result = recorder.result(named: "Zeroconf Table"), case .bonjour(let txt) = result.metadata else { return false }
            return txt["players"] == "2"
        }
        // The SRV record resolves: the port zeroconf advertised.
        let endpoint = try #require(recorder.result(named: "Zeroconf Table")).endpoint
        let resolved = try await ServiceResolver.addresses(for: endpoint)
        #expect(!resolved.isEmpty)
        #expect(resolved.allSatisfy { $0.port == 4711 })
    }

    @Test func zeroconfFindsABraidServiceAndSeesItsGoodbye() async throws {
        let type = uniqueServiceType()
        let peer = try Self.peer(["browse", type])
        defer { Task { await peer.stop() } }
        _ = try await peer.jsonLine(within: 90) { $0["browsing"] != nil }
        let advertised = try AdvertisedEcho(NWListener.Service(name: "Braid Table", type: type, txtRecord: NWTXTRecord(["players": "3"])))
        let added = try await peer.jsonLine(within: 90) { $0["event"] as? String == "added" && $0["port"] != nil }
        #expect(added["name"] as? String == "Braid Table.\(type).local.")
        #expect(added["port"] as? Int == Int(advertised.listener.port?.rawValue ?? 0))
        #expect((added["txt"] as? [String: String])?["players"] == "3")
        #expect((added["addresses"] as? [String])?.isEmpty == false)
        advertised.listener.cancel()
        let removed = try await peer.jsonLine(within: 60) { $0["event"] as? String == "removed" }
        #expect(removed["name"] as? String == "Braid Table.\(type).local.")
    }
}
