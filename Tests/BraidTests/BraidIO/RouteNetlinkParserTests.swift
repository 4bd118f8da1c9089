import BraidIO
import Testing

private typealias Build = NetlinkMessageBuilder

@Suite struct RouteNetlinkParserTests {
    @Test func readsLinksAddressesRoutesAndTheEndOfADump() {
        let bytes =
            Build.link(index: 2, name: "eth0", flags: 0x1 | 0x40, sequence: 7)
            + Build.link(index: 3, name: "veth1", flags: 0x1, kind: "veth", sequence: 7)
            + Build.address(index: 2, ipv4: [192, 0, 2, 10])
            + Build.defaultRoute(output: 2, gateway: [192, 0, 2, 1], priority: 100)
            + Build.done(sequence: 7)
        let result = RouteNetlinkParser.parse(bytes)
        #expect(result.malformed == 0)
        #expect(
            result.messages.map(\.content) == [
                .link(NetlinkLink(index: 2, name: "eth0", hardwareType: 1, flags: 0x41)),
                .link(NetlinkLink(index: 3, name: "veth1", hardwareType: 1, flags: 0x1, kind: "veth")),
                .address(NetlinkAddress(interfaceIndex: 2, family: 2, bytes: [192, 0, 2, 10], prefixLength: 24, scope: 0, flags: 0x80)),
                .route(
                    NetlinkRoute(
                        family: 2, table: 254, type: 1, destinationLength: 0, destination: [], priority: 100,
                        nexthops: [.init(interfaceIndex: 2, gateway: [192, 0, 2, 1], gatewayFamily: 2)]),
                    replacing: false),
                .done,
            ])
        #expect(result.messages.map(\.sequence) == [7, 7, 0, 0, 7])
    }

    @Test func readsAMultipathRouteAndAKernelError() {
        // Two next hops: (length 16, flags 0, hops 0, ifindex 2, RTA_GATEWAY) and one on-link.
        let hop1 = Build.le16(16) + [0, 0] + Build.le32(2) + Build.attribute(5, [10, 0, 0, 1])
        let hop2 = Build.le16(8) + [0x10, 0] + Build.le32(3)
        var body: [UInt8] = [2, 0, 0, 0, 254, 3, 0, 1] + Build.le32(0)
        body += Build.attribute(9, hop1 + hop2)
        let error = Build.message(type: RouteNetlinkParser.messageError, sequence: 4, body: Build.le32(UInt32(bitPattern: -16)) + [UInt8](repeating: 0, count: 16))
        let result = RouteNetlinkParser.parse(Build.message(type: RouteNetlinkParser.newRoute, flags: 0x100, body: body) + error)
        #expect(result.malformed == 0)
        guard result.messages.count == 2, case .route(let route, let replacing) = result.messages[0].content else {
            Issue.record("expected a route and an error, got \(result.messages)")
            return
        }
        #expect(replacing)
        #expect(route.nexthops == [.init(interfaceIndex: 2, gateway: [10, 0, 0, 1], gatewayFamily: 2), .init(interfaceIndex: 3, gateway: nil, gatewayFamily: 2, flags: 0x10)])
        #expect(result.messages[1] == RouteNetlinkMessage(sequence: 4, content: .error(16)))
    }

    /// Malformed and truncated input: every prefix of a valid buffer, impossible lengths,
    /// attributes that overrun their message, wrong address sizes. Nothing traps, nothing
    /// malformed comes out as a record, and the valid messages before the damage still do.
    @Test func malformedAndTruncatedMessagesAreSkippedNotTrusted() {
        let pieces = [
            Build.link(index: 2, name: "eth0", flags: 0x41), Build.address(index: 2, ipv4: [192, 0, 2, 10]),
            Build.defaultRoute(output: 2, gateway: [192, 0, 2, 1]),
        ]
        let valid = pieces.flatMap { $0 }
        let boundaries = [0, pieces[0].count, pieces[0].count + pieces[1].count, valid.count]
        let whole = RouteNetlinkParser.parse(valid)
        #expect(whole.messages.count == 3 && whole.malformed == 0)
        for length in 0..<valid.count {
            let result = RouteNetlinkParser.parse(Array(valid[0..<length]))
            #expect(result.messages.count <= 3)
            // Every record that comes out of a prefix is one of the whole buffer's records.
            for message in result.messages { #expect(whole.messages.contains(message), "prefix \(length)") }
            // Cut inside a message: the rest is reported malformed, not read.
            #expect((result.malformed == 0) == boundaries.contains(length), "prefix \(length)")
        }

        // A header claiming more bytes than there are, and one claiming fewer than a header.
        var overlong = Build.link(index: 2, name: "eth0", flags: 0x41)
        overlong.replaceSubrange(0..<4, with: Build.le32(10_000))
        #expect(RouteNetlinkParser.parse(overlong) == .init(messages: [], malformed: 1))
        var tiny = Build.link(index: 2, name: "eth0", flags: 0x41)
        tiny.replaceSubrange(0..<4, with: Build.le32(3))
        #expect(RouteNetlinkParser.parse(tiny) == .init(messages: [], malformed: 1))

        // An attribute whose length runs past its message; an attribute of length 0.
        var badAttribute = Build.link(index: 2, name: "eth0", flags: 0x41)
        badAttribute.replaceSubrange(32..<34, with: Build.le16(200))
        #expect(RouteNetlinkParser.parse(badAttribute + valid).messages.count == 3)
        #expect(RouteNetlinkParser.parse(badAttribute).malformed == 1)
        var zeroAttribute = Build.link(index: 2, name: "eth0", flags: 0x41)
        zeroAttribute.replaceSubrange(32..<34, with: Build.le16(0))
        #expect(RouteNetlinkParser.parse(zeroAttribute) == .init(messages: [], malformed: 1))

        // A link body shorter than ifinfomsg; an IPv4 address of 3 bytes; a route gateway of
        // 5 bytes; an unknown address family; a prefix longer than the address.
        let shortLink = Build.message(type: RouteNetlinkParser.newLink, body: [0, 0, 1, 0])
        var body: [UInt8] = [2, 24, 0, 0] + Build.le32(2)
        let shortAddress = Build.message(type: RouteNetlinkParser.newAddress, body: body + Build.attribute(2, [192, 0, 2]))
        let longGateway = Build.defaultRoute(output: 2, gateway: [192, 0, 2, 1, 9])
        body[0] = 99
        let strangeFamily = Build.message(type: RouteNetlinkParser.newAddress, body: body + Build.attribute(2, [192, 0, 2, 1]))
        let longPrefix = Build.address(index: 2, ipv4: [192, 0, 2, 10], prefix: 33)
        let result = RouteNetlinkParser.parse(shortLink + shortAddress + longGateway + strangeFamily + longPrefix + valid)
        #expect(result.malformed == 5)
        #expect(result.messages == whole.messages)

        // A multipath next hop whose length is impossible.
        let badHop = Build.le16(4) + [0, 0] + Build.le32(2)
        let multipath = Build.message(type: RouteNetlinkParser.newRoute, body: [2, 0, 0, 0, 254, 3, 0, 1] + Build.le32(0) + Build.attribute(9, badHop))
        #expect(RouteNetlinkParser.parse(multipath) == .init(messages: [], malformed: 1))
    }

    /// Random bytes, and valid messages with random bytes flipped: the parser never traps and
    /// never reports more messages than the headers could hold.
    @Test func randomBytesNeverTrap() {
        var generator = SeededRandom(seed: 0x5EED)
        let valid = Build.link(index: 2, name: "eth0", flags: 0x41, kind: "veth") + Build.address(index: 2, ipv4: [192, 0, 2, 10])
            + Build.address6(index: 2, ipv6: [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1])
            + Build.defaultRoute(output: 2, gateway: [192, 0, 2, 1])
        for round in 0..<3000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            } else {
                bytes = valid
                for _ in 0..<(1 + generator.next() % 6) {
                    bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            let result = RouteNetlinkParser.parse(bytes)
            #expect(result.messages.count <= bytes.count / RouteNetlinkParser.headerSize)
        }
    }
}
