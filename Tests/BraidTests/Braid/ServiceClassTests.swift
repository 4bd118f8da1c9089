import Dispatch
import Foundation
import Glibc
import Testing

@testable import Braid

/// A plain UDP socket on 127.0.0.1 that reads the TOS byte of what arrives (IP_RECVTOS): the
/// service class's DSCP mark as it left the sender, seen from outside Braid.
final class TOSProbe: @unchecked Sendable {
    // @unchecked: the descriptor is written once, in init, and closed in deinit.
    let fd: Int32
    let port: NWEndpoint.Port

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_RECVTOS, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard fd >= 0, bound == 0 else { throw NetworkError.system(call: "bind", errno: errno) }
        self.fd = fd
        port = NWEndpoint.Port(integerLiteral: UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }

    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: port) }

    /// The TOS byte of the next datagram, waiting at most `seconds`; nil if none came.
    func nextTOS(within seconds: Int32 = 60) -> UInt8? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, seconds * 1000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var control = [UInt8](repeating: 0, count: 128)
        return buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { control in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vector -> UInt8? in
                    var message = msghdr()
                    message.msg_iov = vector
                    message.msg_iovlen = 1
                    message.msg_control = control.baseAddress
                    message.msg_controllen = control.count
                    guard recvmsg(fd, &message, 0) >= 0 else { return nil }
                    var header = CMSG_FIRSTHDR_(&message)
                    while let current = header {
                        if current.pointee.cmsg_level == Int32(IPPROTO_IP), current.pointee.cmsg_type == IP_TOS {
                            return (UnsafeMutableRawPointer(current) + MemoryLayout<cmsghdr>.stride).load(as: UInt8.self)
                        }
                        header = CMSG_NXTHDR_(&message, current)
                    }
                    return nil
                }
            }
        }
    }
}

// The CMSG macros, which Swift cannot import.
private func CMSG_FIRSTHDR_(_ message: UnsafeMutablePointer<msghdr>) -> UnsafeMutablePointer<cmsghdr>? {
    guard message.pointee.msg_controllen >= MemoryLayout<cmsghdr>.size else { return nil }
    return message.pointee.msg_control?.assumingMemoryBound(to: cmsghdr.self)
}

private func CMSG_NXTHDR_(_ message: UnsafeMutablePointer<msghdr>, _ header: UnsafeMutablePointer<cmsghdr>) -> UnsafeMutablePointer<cmsghdr>? {
    let alignment = MemoryLayout<Int>.size
    let length = (Int(header.pointee.cmsg_len) + alignment - 1) & ~(alignment - 1)
    let next = UnsafeMutableRawPointer(header) + length
    let end = message.pointee.msg_control! + Int(message.pointee.msg_controllen)
    guard next + MemoryLayout<cmsghdr>.size <= end else { return nil }
    return next.assumingMemoryBound(to: cmsghdr.self)
}

/// The service class's DSCP mark leaves on every stack's packets, seen by a socket outside
/// Braid: UDP's (the socket's mark), QUIC's (with each packet's ECN bits in the same byte, so
/// the mark rides in every message's own TOS), and the classic API's.
@Suite(.timeLimit(.minutes(3))) struct ServiceClassTests {
    @Test func aUDPConnectionMarksItsDatagrams() async throws {
        let probe = try TOSProbe()
        let connection = NetworkConnection(to: probe.endpoint, using: .parameters { UDP() }.serviceClass(.interactiveVoice))
        defer { connection.cancel() }
        try await connection.send(Data("mark".utf8))
        let tos = try #require(await Task.detached { probe.nextTOS() }.value)
        #expect(tos >> 2 == NWParameters.ServiceClass.interactiveVoice.dscp)
    }

    @Test func aQUICConnectionMarksItsPacketsBesideTheirECN() async throws {
        let probe = try TOSProbe()
        let connection = NetworkConnection(to: probe.endpoint, using: .parameters {
            QUIC(alpn: ["echo"]).testTimeouts()
        }.serviceClass(.interactiveVideo))
        defer { connection.cancel() }
        connection.start()
        // Nothing answers: the Initial (and its retransmissions) reach the probe.
        let tos = try #require(await Task.detached { probe.nextTOS() }.value)
        #expect(tos >> 2 == NWParameters.ServiceClass.interactiveVideo.dscp)
    }

    @Test func unmarkedByDefault() async throws {
        let probe = try TOSProbe()
        let connection = NetworkConnection(to: probe.endpoint) { UDP() }
        defer { connection.cancel() }
        try await connection.send(Data("plain".utf8))
        let tos = try #require(await Task.detached { probe.nextTOS() }.value)
        #expect(tos >> 2 == 0)
    }

    @Test func aClassicUDPConnectionMarksItsDatagrams() async throws {
        let probe = try TOSProbe()
        let parameters = NWParameters.udp
        parameters.serviceClass = .signaling
        let connection = NWConnection(to: probe.endpoint, using: parameters)
        defer { connection.cancel() }
        connection.start(queue: DispatchQueue(label: "client"))
        connection.send(content: Data("mark".utf8), completion: .idempotent)
        let tos = try #require(await Task.detached { probe.nextTOS() }.value)
        #expect(tos >> 2 == NWParameters.ServiceClass.signaling.dscp)
    }

    @Test func multipathStaysTCPs() async throws {
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9), using: .parameters { UDP() }.multipathServiceType(.handover))
        await #expect(throws: NetworkError.unsupported("multipathServiceType on UDP connections (TCP and TLS stacks apply it)")) {
            try await connection.send(Data("x".utf8))
        }
    }
}
