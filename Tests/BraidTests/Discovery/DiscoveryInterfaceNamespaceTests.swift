import BraidCore
import Foundation
import Testing

@testable import Braid

/// Discovery and the parameters' interface rules, between hosts in network namespaces: a host
/// with two links, `eth0` (segment 0, 10.77.0.1) and `wwan0` (segment 1, 10.78.0.1; cellular by
/// its name, so expensive), a wired host on segment 0 and a host on segment 1. A listener
/// advertises only on the interfaces its parameters allow, each link's answers carry that
/// link's address alone, and a browser takes results only from allowed interfaces.
@Suite(.serialized, .timeLimit(.minutes(4))) struct DiscoveryInterfaceNamespaceTests {
    static let links = [
        DiscoveryLAN.Link(host: 0, name: "eth0", segment: 0),
        DiscoveryLAN.Link(host: 0, name: "wwan0", segment: 1),
        DiscoveryLAN.Link(host: 1, name: "eth0", segment: 0),
        DiscoveryLAN.Link(host: 2, name: "eth0", segment: 1),
    ]

    @Test func aListenerAdvertisesOnlyWhereItsParametersAllowWithEachLinksAddress() async throws {
        try await DiscoveryLAN.with(hosts: 3, links: Self.links) { hosts in
            let (multi, wired, cell) = (hosts[0], hosts[1], hosts[2])
            let open = try multi.runNow { try AdvertisedEcho(NWListener.Service(name: "Open", type: "_game._tcp")) }
            defer { open.listener.cancel() }
            let parameters = NWParameters.tcp
            parameters.prohibitExpensivePaths = true
            let wiredOnly = try NWListener(service: NWListener.Service(name: "Wired only", type: "_game._tcp"), using: parameters)
            wiredOnly.newConnectionHandler = { $0.cancel() }
            multi.runNow { wiredOnly.start(queue: .global()) }
            defer { wiredOnly.cancel() }

            let browsers = [wired, cell].map { _ in NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: .tcp) }
            let recorders = browsers.map(BrowseRecorder.init)
            for (host, browser) in zip([wired, cell], browsers) { host.runNow { browser.start(queue: .global()) } }
            defer { for browser in browsers { browser.cancel() } }
            let (onWired, onCell) = (recorders[0], recorders[1])
            try await waitUntil("both services on the wired host", describe: { "\(onWired.names)" }) { onWired.names == ["Open", "Wired only"] }
            try await waitUntil("Open on the other segment", describe: { "\(onCell.names)" }) { onCell.names.contains("Open") }

            // Each segment resolves Open to the advertiser's address on that segment alone.
            let port = try #require(open.listener.port)
            let endpoint = NWEndpoint.service(name: "Open", type: "_game._tcp", domain: "local.", interface: nil)
            let fromWired = try await wired.run { try await ServiceResolver.addresses(for: endpoint) }
            #expect(fromWired.map(\.ipString) == [multi.addresses["eth0"]!])
            #expect(fromWired.allSatisfy { $0.port == port.rawValue })
            let fromCell = try await cell.run { try await ServiceResolver.addresses(for: endpoint) }
            #expect(fromCell.map(\.ipString) == [multi.addresses["wwan0"]!])

            // The resolution took further rounds of queries, which the responder on wwan0 would
            // have answered for "Wired only" too had it run there.
            #expect(onCell.names == ["Open"])
        }
    }

    @Test func aBrowserTakesResultsOnlyFromAllowedInterfaces() async throws {
        try await DiscoveryLAN.with(hosts: 3, links: Self.links) { hosts in
            let (multi, wired, cell) = (hosts[0], hosts[1], hosts[2])
            let wiredTable = try wired.runNow { try AdvertisedEcho(NWListener.Service(name: "Wired table", type: "_game._tcp")) }
            defer { wiredTable.listener.cancel() }
            let cellTable = try cell.runNow { try AdvertisedEcho(NWListener.Service(name: "Cell table", type: "_game._tcp")) }
            defer { cellTable.listener.cancel() }

            let noCellular = NWParameters.tcp
            noCellular.prohibitedInterfaceTypes = [.cellular]
            let noExpensive = NWParameters.tcp
            noExpensive.prohibitExpensivePaths = true
            let onlyWWAN = NWParameters.tcp
            onlyWWAN.requiredInterface = NWInterface(type: .cellular, name: "wwan0", index: 0)
            let browsers = [NWParameters.tcp, noCellular, noExpensive, onlyWWAN].map { NWBrowser(for: .bonjour(type: "_game._tcp", domain: nil), using: $0) }
            let recorders = browsers.map(BrowseRecorder.init)
            for browser in browsers { multi.runNow { browser.start(queue: .global()) } }
            defer { for browser in browsers { browser.cancel() } }
            let everything = recorders[0]
            try await waitUntil("both tables", describe: { "\(everything.names)" }) { everything.names == ["Cell table", "Wired table"] }
            // Each result names the interface it was found on.
            let cellResult = try #require(everything.result(named: "Cell table"))
            #expect(cellResult.interfaces.map(\.name) == ["wwan0"])
            try await waitUntil("the filtered browsers' results", describe: { "\(recorders.map(\.names))" }) {
                recorders[1].names.contains("Wired table") && recorders[2].names.contains("Wired table") && recorders[3].names.contains("Cell table")
            }
            // The unfiltered browser on the same host heard both: the others left one out.
            #expect(recorders[1].names == ["Wired table"])
            #expect(recorders[2].names == ["Wired table"])
            #expect(recorders[3].names == ["Cell table"])
        }
    }
}
