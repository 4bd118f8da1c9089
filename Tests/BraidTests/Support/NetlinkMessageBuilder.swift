import BraidIO

/// Builds rtnetlink messages byte by byte, as the kernel lays them out (host order, 4-byte
/// alignment), so the parser and the table are tested without a socket.
enum NetlinkMessageBuilder {
    static func attribute(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] {
        var bytes = le16(UInt16(4 + payload.count)) + le16(type) + payload
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    static func message(type: UInt16, flags: UInt16 = 0, sequence: UInt32 = 0, body: [UInt8]) -> [UInt8] {
        var bytes = le32(UInt32(16 + body.count)) + le16(type) + le16(flags) + le32(sequence) + le32(0) + body
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    static func link(
        type: UInt16 = RouteNetlinkParser.newLink, index: Int32, name: String, hardwareType: UInt16 = 1, flags: UInt32,
        kind: String? = nil, sequence: UInt32 = 0
    ) -> [UInt8] {
        var body: [UInt8] = [0, 0] + le16(hardwareType) + le32(UInt32(bitPattern: index)) + le32(flags) + le32(0xFFFF_FFFF)
        body += attribute(3, Array(name.utf8) + [0])
        if let kind { body += attribute(18 | 0x8000, attribute(1, Array(kind.utf8) + [0])) }
        return message(type: type, flags: sequence == 0 ? 0 : 2, sequence: sequence, body: body)
    }

    static func address(
        type: UInt16 = RouteNetlinkParser.newAddress, index: Int32, ipv4: [UInt8], prefix: UInt8 = 24, flags: UInt32 = 0x80,
        scope: UInt8 = 0
    ) -> [UInt8] {
        var body: [UInt8] = [2, prefix, UInt8(truncatingIfNeeded: flags), scope] + le32(UInt32(bitPattern: index))
        body += attribute(1, ipv4) + attribute(2, ipv4) + attribute(8, le32(flags))
        return message(type: type, body: body)
    }

    static func address6(index: Int32, ipv6: [UInt8], prefix: UInt8 = 64, flags: UInt32 = 0x80, scope: UInt8 = 0) -> [UInt8] {
        var body: [UInt8] = [10, prefix, UInt8(truncatingIfNeeded: flags), scope] + le32(UInt32(bitPattern: index))
        body += attribute(1, ipv6) + attribute(8, le32(flags))
        return message(type: RouteNetlinkParser.newAddress, body: body)
    }

    static func defaultRoute(
        type: UInt16 = RouteNetlinkParser.newRoute, family: UInt8 = 2, output: Int32, gateway: [UInt8]?, priority: UInt32 = 0,
        flags: UInt16 = 0
    ) -> [UInt8] {
        var body: [UInt8] = [family, 0, 0, 0, 254, 3, 0, 1] + le32(0)
        body += attribute(15, le32(254)) + attribute(4, le32(UInt32(bitPattern: output))) + attribute(6, le32(priority))
        if let gateway { body += attribute(5, gateway) }
        return message(type: type, flags: flags, body: body)
    }

    static func done(sequence: UInt32) -> [UInt8] {
        message(type: RouteNetlinkParser.messageDone, flags: 2, sequence: sequence, body: le32(0))
    }

    static func le16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    static func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
}
