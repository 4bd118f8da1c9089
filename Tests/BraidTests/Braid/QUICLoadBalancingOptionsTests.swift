import BraidIO
import BraidQUIC
import Foundation
import Testing
@testable import Braid

/// The listener options for servers behind a load balancer: connection-ID formats reach the
/// engine checked, and fleet keys load from a file and rotate on `reload()`.
@Suite struct QUICLoadBalancingOptionsTests {
    func listenerQUIC() -> QUIC {
        testServer()
    }

    @Test func connectionIDFormatsReachTheEngineChecked() throws {
        let katran = try listenerQUIC().connectionIDFormat(.katran(version: .v2, serverID: 42)).serverConfiguration()
        #expect(katran.connectionIDFormat == .katran(.v2, serverID: 42))
        let lb = try listenerQUIC()
            .connectionIDFormat(.quicLB(configRotation: 2, serverID: Data([1, 2]), nonceLength: 6, key: Data(count: 16)))
            .serverConfiguration()
        #expect(lb.connectionIDFormat.length == 10)
        #expect(throws: NetworkError.self) {
            try listenerQUIC().connectionIDFormat(.katran(version: .v1, serverID: 70_000)).serverConfiguration()
        }
        // A negative codepoint is refused, not taken as 0.
        #expect(throws: NetworkError.self) {
            try listenerQUIC().connectionIDFormat(.quicLB(configRotation: -1, serverID: Data([1, 2]), nonceLength: 6)).serverConfiguration()
        }
        do {
            _ = try listenerQUIC().connectionIDFormat(.awsNetworkLoadBalancer(serverID: 0x1122_3344_5566_7788)).serverConfiguration()
            Issue.record("an AWS format must be refused as unsupported")
        } catch NetworkError.unsupported(let what) {
            #expect(what.contains("AWS"))
        }
    }

    @Test func fleetKeysReloadFromTheirFileWithAnOverlap() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("braid-fleet-keys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let old = String(repeating: "11", count: 32), new = String(repeating: "22", count: 32)
        try "# fleet\n\(old)\n".write(toFile: path, atomically: true, encoding: .utf8)
        let keys = try QUIC.FleetKeys(contentsOfFile: path, overlap: .seconds(600))
        let configuration = try listenerQUIC().fleetKeys(keys).serverConfiguration()
        #expect(configuration.keyRing === keys.ring)
        let first = keys.ring.current
        try "\(new)\n".write(toFile: path, atomically: true, encoding: .utf8)
        try keys.reload()
        #expect(keys.ring.current !== first)
        // The old generation left the list and is accepted for the overlap.
        #expect(keys.ring.accepted(at: monotonicNow()).contains { $0 === first })
        // A file that does not parse leaves the keys as they were.
        let current = keys.ring.current
        try "not hex\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: NetworkError.self) { try keys.reload() }
        #expect(keys.ring.current === current)
        #expect(throws: NetworkError.self) { try QUIC.FleetKeys(secrets: [Data(count: 8)]) }
    }
}
