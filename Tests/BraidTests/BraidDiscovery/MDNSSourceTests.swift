@testable import BraidDiscovery
import BraidDiscoveryIO
import Testing

/// Which datagrams reach the engines (RFC 6762 §6, §11): responses only from port 5353, anything
/// only from the local link; and how the channel shares its reads between its sockets.
@Suite struct MDNSSourceTests {
    static let type = try! DNSName("_sourcetest._tcp.local")
    /// An interface at 192.168.1.10/24 and 2001:db8:1::10/64.
    static let subnets = [
        MDNSSubnet(address: [192, 168, 1, 10], mask: [255, 255, 255, 0]),
        MDNSSubnet(address: [0x20, 0x01, 0x0D, 0xB8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10], mask: [UInt8](repeating: 255, count: 8) + [UInt8](repeating: 0, count: 8)),
    ]

    static func announcement(_ instance: String) throws -> DNSMessage {
        let name = try DNSName(prefix: Array(instance.utf8), type)
        return DNSMessage(isResponse: true, answers: [DNSResourceRecord(name: type, ttl: 4500, data: .ptr(name))])
    }

    @Test func theBrowserIgnoresResponsesFromAnotherPort() throws {
        var browser = MDNSBrowser(serviceType: Self.type, now: .zero)
        browser.receive(try Self.announcement("Spoofed"), interface: 1, now: .zero, fromPort: 40000)
        #expect(browser.results().isEmpty)
        browser.receive(try Self.announcement("Real"), interface: 1, now: .zero, fromPort: 5353)
        #expect(browser.results().map(\.instance) == [Array("Real".utf8)])
    }

    @Test func aResponseFromAnotherPortIsNoConflict() throws {
        let service = MDNSServiceDescription(
            instance: Array("Mine".utf8), serviceType: Self.type, port: 4433, txt: [],
            hostLabel: Array("host-a".utf8), addresses: [.a([10, 0, 0, 1])])
        var responder = MDNSResponder(service: service, now: .zero, seed: 1)
        _ = responder.poll(now: .milliseconds(300))
        let claim = DNSMessage(isResponse: true, answers: [
            DNSResourceRecord(name: responder.instanceName, cacheFlush: true, ttl: 120,
                              data: .srv(priority: 0, weight: 0, port: 1, target: try DNSName("other.local"))),
        ])
        _ = responder.receive(claim, now: .milliseconds(310), fromPort: 40000)
        #expect(responder.service.instance == Array("Mine".utf8))
        _ = responder.receive(claim, now: .milliseconds(320), fromPort: 5353)
        #expect(responder.service.instance == Array("Mine (2)".utf8))
    }

    @Test func onlySourcesOnTheLinkAreAdmitted() throws {
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: Self.type, type: .ptr)])
        let response = try Self.announcement("X")
        let onLink = MDNSSource(address: [192, 168, 1, 77], port: 5353)
        let offLink = MDNSSource(address: [192, 168, 2, 77], port: 5353)
        #expect(onLink.admits(query, arrivingOn: Self.subnets))
        #expect(onLink.admits(response, arrivingOn: Self.subnets))
        #expect(!offLink.admits(query, arrivingOn: Self.subnets))
        #expect(!offLink.admits(response, arrivingOn: Self.subnets))
        // A source on the link of another interface is not on this one.
        #expect(!onLink.admits(response, arrivingOn: []))
        let v6On = MDNSSource(address: [0x20, 0x01, 0x0D, 0xB8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99], port: 5353)
        let v6Off = MDNSSource(address: [0x20, 0x01, 0x0D, 0xB8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99], port: 5353)
        #expect(v6On.admits(response, arrivingOn: Self.subnets))
        #expect(!v6Off.admits(response, arrivingOn: Self.subnets))
        // Link-local sources are on the link they arrive on.
        #expect(MDNSSource(address: [169, 254, 3, 4], port: 5353).admits(response, arrivingOn: []))
        #expect(MDNSSource(address: [0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1], port: 5353).admits(response, arrivingOn: []))
    }

    @Test func legacyUnicastQueriesAreAnsweredOnlyFromTheLink() throws {
        let query = DNSMessage(id: 7, isResponse: false, questions: [DNSQuestion(name: Self.type, type: .ptr)])
        #expect(MDNSSource(address: [192, 168, 1, 77], port: 40000).admits(query, arrivingOn: Self.subnets))
        #expect(!MDNSSource(address: [203, 0, 113, 5], port: 40000).admits(query, arrivingOn: Self.subnets))
        // A response from such a port is never admitted, on the link or not.
        #expect(!MDNSSource(address: [192, 168, 1, 77], port: 40000).admits(try Self.announcement("X"), arrivingOn: Self.subnets))
    }

    @Test func theChannelReadsItsSocketsInTurnUpToTheCap() {
        // Two sockets with more waiting than one wakeup may read, and one with three datagrams.
        var waiting = [1000, 1000, 3]
        var order: [Int] = []
        MDNSChannel.readInTurn(sources: waiting.count) { index in
            guard waiting[index] > 0 else { return false }
            waiting[index] -= 1
            order.append(index)
            return true
        }
        #expect(order.filter { $0 == 0 }.count == MDNSChannel.readsPerWakeup)
        #expect(order.filter { $0 == 1 }.count == MDNSChannel.readsPerWakeup)
        #expect(order.filter { $0 == 2 }.count == 3)
        #expect(Array(order.prefix(6)) == [0, 1, 2, 0, 1, 2])
    }
}
