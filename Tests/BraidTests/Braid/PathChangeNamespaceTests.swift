import BraidCore
import BraidIO
import Foundation
import Testing

@testable import Braid

/// Ready connections whose paths change under them, in `UplinkNamespaces`' namespaces: a QUIC
/// client moves to the other uplink when its address goes away, and a better uplink that
/// appears is reported.
@Suite(.timeLimit(.minutes(3))) struct PathChangeNamespaceTests {
    /// How the uplink a connection uses goes away.
    enum Loss: String, CaseIterable, Sendable {
        /// `ip address del` of the client's address on it.
        case addressRemoved
        /// `ip link set down`: the address stays, the link cannot carry anything.
        case linkDown
    }

    /// A 20 MB echo on one stream; the client's uplink (wwan7, the kernel's choice) goes away
    /// once 2 MB have come back. The connection moves to ipw2 by itself and every byte comes
    /// back intact, in order.
    @Test(arguments: Loss.allCases)
    func aQUICConnectionMovesToTheOtherUplinkWhenItsOwnGoesAway(_ loss: Loss) async throws {
        let total = 20_000_000
        let payload = patternData(total) { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 16) }
        let identity = testServer()
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addTwoUplinks(client: client, server: server)
            try await UplinkNamespaces.withLoop(in: server) { serverEnvironment in
                let peers = PeerLog()
                let (port, serving) = try await UplinkNamespaces.serve(identity, in: serverEnvironment, peers: peers, echo)
                defer { serving.cancel() }
                try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                    let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                        NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: port)) { testClient() }
                    }
                    defer { connection.cancel() }
                    let viability = Locked<[Bool]>([])
                    connection.onViabilityUpdate { _, isViable in viability.withLock { $0.append(isViable) } }
                    let paths = Locked<[NWPath]>([])
                    connection.onPathUpdate { _, path in paths.withLock { $0.append(path) } }
                    let stream = try await connection.openStream()
                    #expect(try await peers.next() == "10.74.0.1")
                    let sending = Task {
                        var offset = 0
                        while offset < total {
                            let end = min(offset + 65536, total)
                            try await stream.send(payload[offset..<end], endOfStream: end == total)
                            offset = end
                        }
                    }
                    defer { sending.cancel() }
                    var received = Data()
                    received.reserveCapacity(total)
                    var removed: ContinuousClock.Instant?
                    while received.count < total {
                        let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1 << 20)
                        received.append(content)
                        if removed == nil, received.count >= 2_000_000 {
                            switch loss {
                            case .addressRemoved: try await client.ip("address", "del", "10.74.0.1/24", "dev", "wwan7")
                            case .linkDown: _ = try await client.setLink("wwan7", up: false)
                            }
                            removed = .now
                        }
                        if metadata.isEndOfStream { break }
                    }
                    try await sending.value
                    #expect(received.count == total)
                    #expect(received == payload, "the echo differs from what was sent")
                    let statistics = try #require(await connection.statistics)
                    #expect(statistics.migrations == 1)
                    #expect(connection.localEndpoint.map { "\($0)" }?.hasPrefix("10.75.0.1:") == true, "\(String(describing: connection.localEndpoint))")
                    #expect(viability.withLock { $0 }.isEmpty, "it moved, so it never stopped being viable: \(viability.withLock { $0 })")
                    // The path events: over wwan7 from 10.74.0.1, then over ipw2 from 10.75.0.1,
                    // satisfied throughout. (Another test marking wwan7 constrained meanwhile,
                    // the marks being process-wide, adds a wwan7 path: each run of one
                    // interface counts once.)
                    let seen = paths.withLock { $0 }
                    let runs = seen.map { ($0.availableInterfaces.map(\.name), $0.localEndpoint.map { "\($0)".split(separator: ":")[0] }) }
                        .reduce(into: [([String], Substring?)]()) { runs, next in if runs.last?.0 != next.0 { runs.append(next) } }
                    #expect(runs.map(\.0) == [["wwan7"], ["ipw2"]], "\(seen)")
                    #expect(runs.map(\.1) == ["10.74.0.1", "10.75.0.1"], "\(seen)")
                    #expect(seen.allSatisfy { $0.status == .satisfied }, "\(seen)")
                    #expect(seen.allSatisfy { $0.remoteEndpoint == .hostPort(host: .init(UplinkNamespaces.service), port: port) }, "\(seen)")
                    #expect(seen.first?.isExpensive == true && seen.last?.isExpensive == false)
                    print("\(loss) -> 18 MB more echoed over ipw2 in \(ContinuousClock.now - removed!)")
                }
            }
        }
    }

    /// A UDP connection over the only uplink, wwan7 (cellular by its name, so expensive): an
    /// inexpensive uplink that comes up is a better path; down again, it is not.
    @Test func anInexpensiveUplinkIsABetterPathThanAnExpensiveOne() async throws {
        try await UplinkNamespaces.withNamespaces { client, server in
            try await UplinkNamespaces.addUplink("wwan7", subnet: 74, metric: 10, client: client, server: server)
            try await UplinkNamespaces.withLoop(in: client) { clientEnvironment in
                let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                    NetworkConnection(to: .hostPort(host: .init(UplinkNamespaces.service), port: 47_903)) { UDP() }
                }
                defer { connection.cancel() }
                let updates = AsyncStream<Bool>.makeStream()
                connection.onBetterPathUpdate { _, available in updates.continuation.yield(available) }
                // No update within 60 s: the stream ends, and the expectations below fail.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(60))
                    updates.continuation.finish()
                }
                defer { watchdog.cancel() }
                try await UplinkNamespaces.ready(connection)
                var betterPath = updates.stream.makeAsyncIterator()
                try await UplinkNamespaces.addUplink("ipw2", subnet: 75, metric: 20, client: client, server: server)
                #expect(await betterPath.next() == true)
                _ = try await client.setLink("ipw2", up: false)
                #expect(await betterPath.next() == false)
                #expect(connection.state == .ready)
                #expect(connection.localEndpoint.map { "\($0)" }?.hasPrefix("10.74.0.1:") == true)
            }
        }
    }

    @Test func betterMeansInexpensiveThenUnconstrainedThenWiredOverWiFiOverOtherOverCellular() {
        let marks = NetworkInterfacePolicy.Marks(expensive: ["eth9"], constrained: ["wlan9"])
        func interface(_ type: NWInterface.InterfaceType, _ name: String) -> NWInterface { NWInterface(type: type, name: name, index: 0) }
        let wired = interface(.wiredEthernet, "eth0"), wifi = interface(.wifi, "wlan0"), other = interface(.other, "veth0")
        let cellular = interface(.cellular, "wwan0"), expensiveWired = interface(.wiredEthernet, "eth9")
        let constrainedWiFi = interface(.wifi, "wlan9")
        let prefers = { ConnectionPathWatch.prefers($0, over: $1, marks: marks) }
        #expect(prefers(wired, wifi) && prefers(wifi, other) && prefers(other, cellular))
        #expect(!prefers(wifi, wired) && !prefers(wired, wired))
        #expect(prefers(cellular, expensiveWired) == false, "both expensive: the type decides")
        #expect(prefers(other, expensiveWired))
        #expect(prefers(other, constrainedWiFi) && !prefers(constrainedWiFi, other))
        #expect(prefers(constrainedWiFi, cellular))
    }
}
