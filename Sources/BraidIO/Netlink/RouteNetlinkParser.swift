/// Reads rtnetlink messages (links, addresses, routes, a dump's end) out of the bytes one
/// receive returned. Sans-IO: bytes in, records out, so it is tested and fuzzed without sockets.
///
/// The kernel writes these messages, but they are read defensively all the same: every length
/// is checked against what is left before anything is read, a malformed message or attribute
/// is skipped (and counted) rather than trusted, and no input can trap or make it allocate more
/// than the input's size.
package enum RouteNetlinkParser {
    // Message types (linux/netlink.h, linux/rtnetlink.h).
    package static let messageError: UInt16 = 2
    package static let messageDone: UInt16 = 3
    package static let messageOverrun: UInt16 = 4
    package static let newLink: UInt16 = 16
    package static let deleteLink: UInt16 = 17
    package static let getLink: UInt16 = 18
    package static let newAddress: UInt16 = 20
    package static let deleteAddress: UInt16 = 21
    package static let getAddress: UInt16 = 22
    package static let newRoute: UInt16 = 24
    package static let deleteRoute: UInt16 = 25
    package static let getRoute: UInt16 = 26

    // Header flags.
    package static let flagRequest: UInt16 = 0x1
    package static let flagDumpInterrupted: UInt16 = 0x10
    package static let flagReplace: UInt16 = 0x100
    package static let flagDump: UInt16 = 0x300

    /// struct nlmsghdr.
    package static let headerSize = 16

    /// What one buffer held: the messages understood, and how many were malformed (skipped).
    package struct Result: Sendable, Equatable {
        package var messages: [RouteNetlinkMessage] = []
        package var malformed = 0

        package init(messages: [RouteNetlinkMessage] = [], malformed: Int = 0) {
            self.messages = messages
            self.malformed = malformed
        }
    }

    package static func parse(_ bytes: [UInt8]) -> Result {
        bytes.withUnsafeBytes { parse($0) }
    }

    package static func parse(_ buffer: UnsafeRawBufferPointer) -> Result {
        var result = Result()
        var offset = 0
        while buffer.count - offset >= headerSize {
            let length = Int(buffer.load32(at: offset))
            // A length that cannot be a message, or runs past the buffer, leaves nothing after
            // it that can be trusted to start a message.
            guard length >= headerSize, length <= buffer.count - offset else {
                result.malformed += 1
                return result
            }
            let type = buffer.load16(at: offset + 4)
            let flags = buffer.load16(at: offset + 6)
            let sequence = buffer.load32(at: offset + 8)
            let body = UnsafeRawBufferPointer(rebasing: buffer[(offset + headerSize)..<(offset + length)])
            switch content(type: type, flags: flags, body: body) {
            case .some(.some(let content)):
                result.messages.append(
                    RouteNetlinkMessage(sequence: sequence, interrupted: flags & flagDumpInterrupted != 0, content: content))
            case .some(.none):
                break  // A type this reader has no use for (NLMSG_NOOP, an ACK).
            case .none:
                result.malformed += 1
            }
            offset += min(aligned(length), buffer.count - offset)
        }
        if offset != buffer.count { result.malformed += 1 }
        return result
    }

    /// nil: malformed; .some(nil): understood and ignored.
    private static func content(type: UInt16, flags: UInt16, body: UnsafeRawBufferPointer) -> RouteNetlinkMessage.Content?? {
        switch type {
        case messageDone:
            return .some(.done)
        case messageOverrun:
            return .some(.overrun)
        case messageError:
            guard body.count >= 4 else { return nil }
            let code = Int32(bitPattern: body.load32(at: 0))
            // Error 0 is an acknowledgement.
            return code == 0 ? .some(nil) : .some(.error(code == .min ? .max : -code))
        case newLink, deleteLink:
            guard let link = parseLink(body) else { return nil }
            return .some(type == newLink ? .link(link) : .linkRemoved(link))
        case newAddress, deleteAddress:
            guard let address = parseAddress(body) else { return nil }
            return .some(type == newAddress ? .address(address) : .addressRemoved(address))
        case newRoute, deleteRoute:
            guard let route = parseRoute(body) else { return nil }
            return .some(type == newRoute ? .route(route, replacing: flags & flagReplace != 0) : .routeRemoved(route))
        default:
            return .some(nil)
        }
    }

    // MARK: Links

    private static let ifinfomsgSize = 16
    private static let attributeName: UInt16 = 3  // IFLA_IFNAME
    private static let attributeWireless: UInt16 = 11  // IFLA_WIRELESS
    private static let attributeLinkInfo: UInt16 = 18  // IFLA_LINKINFO
    private static let linkInfoKind: UInt16 = 1  // IFLA_INFO_KIND

    private static func parseLink(_ body: UnsafeRawBufferPointer) -> NetlinkLink? {
        guard body.count >= ifinfomsgSize else { return nil }
        let hardwareType = body.load16(at: 2)
        let index = Int32(bitPattern: body.load32(at: 4))
        let flags = body.load32(at: 8)
        var link = NetlinkLink(index: index, name: "", hardwareType: hardwareType, flags: flags)
        var named = false
        let valid = forEachAttribute(in: body, from: ifinfomsgSize) { type, payload in
            switch type {
            case attributeName:
                link.name = string(payload)
                named = true
            case attributeWireless:
                link.hasWirelessAttribute = true
            case attributeLinkInfo:
                _ = forEachAttribute(in: payload, from: 0) { infoType, info in
                    if infoType == linkInfoKind { link.kind = string(info) }
                }
            default:
                break
            }
        }
        // A link without its index or name cannot be matched with anything else.
        guard valid, named, index > 0 else { return nil }
        return link
    }

    // MARK: Addresses

    private static let ifaddrmsgSize = 8
    private static let addressAddress: UInt16 = 1  // IFA_ADDRESS
    private static let addressLocal: UInt16 = 2  // IFA_LOCAL
    private static let addressFlags: UInt16 = 8  // IFA_FLAGS

    private static func parseAddress(_ body: UnsafeRawBufferPointer) -> NetlinkAddress? {
        guard body.count >= ifaddrmsgSize else { return nil }
        let family = body[0]
        let size: Int
        switch family {
        case NetlinkAddress.familyIPv4: size = 4
        case NetlinkAddress.familyIPv6: size = 16
        default: return nil
        }
        let prefixLength = body[1]
        guard Int(prefixLength) <= size * 8 else { return nil }
        var flags = UInt32(body[2])
        let scope = body[3]
        let index = Int32(bitPattern: body.load32(at: 4))
        var address: [UInt8]?
        var local: [UInt8]?
        var wellFormed = true
        let valid = forEachAttribute(in: body, from: ifaddrmsgSize) { type, payload in
            switch type {
            case addressAddress, addressLocal:
                guard payload.count == size else {
                    wellFormed = false
                    return
                }
                if type == addressLocal { local = Array(payload) } else { address = Array(payload) }
            case addressFlags:
                guard payload.count >= 4 else {
                    wellFormed = false
                    return
                }
                flags = payload.load32(at: 0)
            default:
                break
            }
        }
        // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on a
        // point-to-point link, and the same as IFA_LOCAL otherwise.
        guard valid, wellFormed, index > 0, let bytes = local ?? address else { return nil }
        return NetlinkAddress(interfaceIndex: index, family: family, bytes: bytes, prefixLength: prefixLength, scope: scope, flags: flags)
    }

    // MARK: Routes

    private static let rtmsgSize = 12
    private static let routeDestination: UInt16 = 1  // RTA_DST
    private static let routeOutput: UInt16 = 4  // RTA_OIF
    private static let routeGateway: UInt16 = 5  // RTA_GATEWAY
    private static let routePriority: UInt16 = 6  // RTA_PRIORITY
    private static let routeMultipath: UInt16 = 9  // RTA_MULTIPATH
    private static let routeTable: UInt16 = 15  // RTA_TABLE
    private static let routeVia: UInt16 = 18  // RTA_VIA
    private static let rtnexthopSize = 8
    /// More next hops than any kernel allows in one route (its limit is 1024 in 6.x);
    /// only for bounding what one malformed message can make.
    private static let nexthopLimit = 1024

    private static func parseRoute(_ body: UnsafeRawBufferPointer) -> NetlinkRoute? {
        guard body.count >= rtmsgSize else { return nil }
        let family = body[0]
        let size: Int
        switch family {
        case NetlinkAddress.familyIPv4: size = 4
        case NetlinkAddress.familyIPv6: size = 16
        default: return nil  // Multicast and MPLS families are of no use to a path.
        }
        let destinationLength = body[1]
        guard Int(destinationLength) <= size * 8 else { return nil }
        var route = NetlinkRoute(
            family: family, table: UInt32(body[4]), type: body[7], destinationLength: destinationLength, destination: [],
            tos: body[3], priority: 0, nexthops: [])
        var output: Int32 = 0
        var gateway: (bytes: [UInt8], family: UInt8)?
        var wellFormed = true
        let valid = forEachAttribute(in: body, from: rtmsgSize) { type, payload in
            switch type {
            case routeDestination:
                guard payload.count == size else {
                    wellFormed = false
                    return
                }
                route.destination = Array(payload)
            case routeOutput:
                guard payload.count >= 4 else {
                    wellFormed = false
                    return
                }
                output = Int32(bitPattern: payload.load32(at: 0))
            case routeGateway:
                guard payload.count == size else {
                    wellFormed = false
                    return
                }
                gateway = (Array(payload), family)
            case routeVia:
                guard let via = parseVia(payload) else {
                    wellFormed = false
                    return
                }
                gateway = via
            case routePriority:
                guard payload.count >= 4 else {
                    wellFormed = false
                    return
                }
                route.priority = payload.load32(at: 0)
            case routeTable:
                guard payload.count >= 4 else {
                    wellFormed = false
                    return
                }
                route.table = payload.load32(at: 0)
            case routeMultipath:
                guard let hops = parseMultipath(payload, family: family, size: size) else {
                    wellFormed = false
                    return
                }
                route.nexthops = hops
            default:
                break
            }
        }
        guard valid, wellFormed else { return nil }
        if route.nexthops.isEmpty, output > 0 {
            route.nexthops = [NetlinkRoute.Nexthop(interfaceIndex: output, gateway: gateway?.bytes, gatewayFamily: gateway?.family ?? family)]
        }
        return route
    }

    /// struct rtvia: a family (u16) and an address of that family.
    private static func parseVia(_ payload: UnsafeRawBufferPointer) -> (bytes: [UInt8], family: UInt8)? {
        guard payload.count >= 2 else { return nil }
        let family = payload.load16(at: 0)
        let bytes = Array(payload[2...])
        switch (family, bytes.count) {
        case (UInt16(NetlinkAddress.familyIPv4), 4): return (bytes, NetlinkAddress.familyIPv4)
        case (UInt16(NetlinkAddress.familyIPv6), 16): return (bytes, NetlinkAddress.familyIPv6)
        default: return nil
        }
    }

    /// RTA_MULTIPATH: struct rtnexthop (length u16, flags u8, hops u8, ifindex i32), each
    /// followed by its own attributes.
    private static func parseMultipath(_ payload: UnsafeRawBufferPointer, family: UInt8, size: Int) -> [NetlinkRoute.Nexthop]? {
        var hops: [NetlinkRoute.Nexthop] = []
        var offset = 0
        while payload.count - offset >= rtnexthopSize {
            let length = Int(payload.load16(at: offset))
            guard length >= rtnexthopSize, length <= payload.count - offset, hops.count < nexthopLimit else { return nil }
            let flags = payload[offset + 2]
            let index = Int32(bitPattern: payload.load32(at: offset + 4))
            var gateway: (bytes: [UInt8], family: UInt8)?
            var wellFormed = true
            let hop = UnsafeRawBufferPointer(rebasing: payload[offset..<(offset + length)])
            let valid = forEachAttribute(in: hop, from: rtnexthopSize) { type, attribute in
                if type == routeGateway {
                    if attribute.count == size { gateway = (Array(attribute), family) } else { wellFormed = false }
                } else if type == routeVia {
                    if let via = parseVia(attribute) { gateway = via } else { wellFormed = false }
                }
            }
            guard valid, wellFormed else { return nil }
            hops.append(NetlinkRoute.Nexthop(interfaceIndex: index, gateway: gateway?.bytes, gatewayFamily: gateway?.family ?? family, flags: flags))
            offset += min(aligned(length), payload.count - offset)
        }
        return hops
    }

    // MARK: Attributes

    /// Calls `body` with each attribute (struct rtattr: length u16, type u16, payload) from
    /// `start`; the type loses its nested and byte-order bits. False if an attribute's length
    /// is impossible or runs past the bytes.
    private static func forEachAttribute(
        in buffer: UnsafeRawBufferPointer, from start: Int, _ body: (UInt16, UnsafeRawBufferPointer) -> Void
    ) -> Bool {
        var offset = start
        while buffer.count - offset >= 4 {
            let length = Int(buffer.load16(at: offset))
            guard length >= 4, length <= buffer.count - offset else { return false }
            let type = buffer.load16(at: offset + 2) & 0x3FFF
            body(type, UnsafeRawBufferPointer(rebasing: buffer[(offset + 4)..<(offset + length)]))
            offset += min(aligned(length), buffer.count - offset)
        }
        // Fewer than four bytes left over can only be padding.
        return true
    }

    /// A NUL-terminated string attribute (the terminator may be missing); invalid UTF-8 is
    /// repaired, never trusted.
    private static func string(_ payload: UnsafeRawBufferPointer) -> String {
        let end = payload.firstIndex(of: 0) ?? payload.count
        return String(decoding: payload[0..<end], as: UTF8.self)
    }

    private static func aligned(_ length: Int) -> Int { (length + 3) & ~3 }
}

extension UnsafeRawBufferPointer {
    /// Host-order reads at an offset the caller has checked.
    fileprivate func load16(at offset: Int) -> UInt16 { loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
    fileprivate func load32(at offset: Int) -> UInt32 { loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
}
