import BraidIO
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A step of a synchronous socket test that did not happen.
struct SocketTestFailure: Error, CustomStringConvertible {
    let description: String
}

/// Connects a client to `listener` and accepts it, waiting with poll (no loop needed).
func connectedPair(to listener: TCPListenerSocket, options: TCPOptions = TCPOptions()) throws -> (client: TCPSocket, server: TCPSocket) {
    let client = try TCPSocket.connect(to: listener.localAddress, options: options)
    guard waitFor(client.fd, Int16(POLLOUT)) else { throw SocketTestFailure(description: "connect did not finish") }
    try client.finishConnect()
    guard waitFor(listener.fd, Int16(POLLIN)), let server = try listener.accept() else {
        throw SocketTestFailure(description: "nothing to accept")
    }
    return (client, server)
}

/// TCP options, read back with getsockopt on client and accepted sockets; multipath and fast
/// open against this machine's kernel.
@Suite(.serialized) struct TCPOptionsTests {
    static let options = TCPOptions(
        noDelay: true, keepAlive: .init(enabled: true, idle: .seconds(30), interval: .milliseconds(4500), count: 4),
        connectionDropTime: .milliseconds(1500), dscp: 46, hopLimit: 17, dontFragment: true,
        sendBufferSize: 96 * 1024, receiveBufferSize: 80 * 1024)

    /// Every option is on the client socket and on the accepted one (applied by the listener),
    /// at the value asked for (keep-alive interval rounded up to whole seconds).
    @Test(arguments: ["127.0.0.1", "::1"])
    func optionsReadBack(ip: String) throws {
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: ip, port: 0)!, options: Self.options)
        let (client, server) = try connectedPair(to: listener, options: Self.options)
        let v6 = ip.contains(":")
        for socket in [client, server] {
            let fd = socket.fd
            #expect(socketOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY) == 1)
            #expect(socketOption(fd, SOL_SOCKET, SO_KEEPALIVE) == 1)
            #expect(socketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE) == 30)
            #expect(socketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL) == 5)
            #expect(socketOption(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT) == 4)
            #expect(socketOption(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT) == 1500)
            if v6 {
                #expect(socketOption(fd, Int32(IPPROTO_IPV6), IPV6_TCLASS) == 46 << 2)
                #expect(socketOption(fd, Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS) == 17)
                #expect(socketOption(fd, Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER) == IPV6_PMTUDISC_DO)
            } else {
                #expect(socketOption(fd, Int32(IPPROTO_IP), IP_TOS) == 46 << 2)
                #expect(socketOption(fd, Int32(IPPROTO_IP), IP_TTL) == 17)
                #expect(socketOption(fd, Int32(IPPROTO_IP), IP_MTU_DISCOVER) == IP_PMTUDISC_DO)
            }
            // Linux reports twice the size it was asked for.
            let sendBuffer: Int32 = 2 * 96 * 1024
            let receiveBuffer: Int32 = 2 * 80 * 1024
            #expect(socketOption(fd, SOL_SOCKET, SO_SNDBUF) == sendBuffer)
            #expect(socketOption(fd, SOL_SOCKET, SO_RCVBUF) == receiveBuffer)
        }
        #expect(server.remoteAddress == client.localAddress)
        #expect(client.remoteAddress == listener.localAddress)
    }

    /// Defaults leave the kernel's settings: Nagle on (noDelay false, as Apple's), no
    /// keep-alive; and dontFragment false clears DF. Setting nothing costs no setsockopt.
    @Test func defaultsAndDontFragmentOff() throws {
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        let (client, _) = try connectedPair(to: listener)
        #expect(socketOption(client.fd, Int32(IPPROTO_TCP), TCP_NODELAY) == 0)
        #expect(socketOption(client.fd, SOL_SOCKET, SO_KEEPALIVE) == 0)
        // socket, connect, getsockname, getsockopt(SO_ERROR): nothing else.
        #expect(client.counters.controlCalls == 4)

        let fragmenting = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions(dontFragment: false))
        #expect(socketOption(fragmenting.fd, Int32(IPPROTO_IP), IP_MTU_DISCOVER) == IP_PMTUDISC_DONT)
    }

    /// A multipath client and a multipath listener: both sockets are MPTCP and the connection
    /// runs MPTCP (no fallback). A multipath client to a plain TCP listener is an MPTCP socket
    /// whose connection fell back to TCP, and `multipathInEffect` says so.
    @Test func multipathConnectsAndDetectsFallback() throws {
        let enabled = try String(contentsOfFile: "/proc/sys/net/mptcp/enabled", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(enabled == "1", "this test needs net.mptcp.enabled=1 (sysctl -w net.mptcp.enabled=1)")
        var options = TCPOptions()
        options.multipath = true
        options.noDelay = true
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, options: options)
        #expect(listener.isMultipath)
        let (client, server) = try connectedPair(to: listener, options: options)
        #expect(client.isMultipath)
        #expect(server.isMultipath)
        #expect(client.multipathInEffect())
        #expect(client.unsupportedOptions.isEmpty)
        // Bytes flow.
        #expect(try Array("mptcp".utf8).withUnsafeBytes { try client.write($0) } == 5)
        #expect(waitFor(server.fd, Int16(POLLIN)))
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(try buffer.withUnsafeMutableBytes { try server.read(into: $0) } == .bytes(5))

        let plain = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        #expect(!plain.isMultipath)
        let (fellBack, _) = try connectedPair(to: plain, options: options)
        #expect(fellBack.isMultipath)
        #expect(!fellBack.multipathInEffect())
    }

    /// Fast open: once a first fast-open connection has fetched the server's cookie (or an
    /// earlier run left it in the kernel's cache), the next one sends nothing at connect; its
    /// first write carries the bytes in the SYN (TCP_INFO's SYN-data option bit on the
    /// client), and the server reads them. Both deliver their bytes. Needs net.ipv4.tcp_fastopen bits 0x1 and
    /// 0x2; the test sets them (it runs as root) and puts the old value back.
    @Test func fastOpenCarriesDataInTheSYN() throws {
        let path = "/proc/sys/net/ipv4/tcp_fastopen"
        let original = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let value = Int(original) ?? 0
        if value & 3 != 3 {
            do {
                try "\(value | 3)".write(toFile: path, atomically: false, encoding: .utf8)
            } catch {
                Issue.record("net.ipv4.tcp_fastopen is \(value) and could not be set to \(value | 3) (needs root): \(error)")
                return
            }
        }
        defer { if value & 3 != 3 { try? original.write(toFile: path, atomically: false, encoding: .utf8) } }

        var options = TCPOptions()
        options.fastOpen = true
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, options: options)
        #expect(socketOption(listener.fd, Int32(IPPROTO_TCP), TCP_FASTOPEN) == 256)

        var secondDeferred = false
        var synData = false
        var delivered: [UInt8] = []
        for round in 0..<2 {
            let client = try TCPSocket.connect(to: listener.localAddress, options: options)
            if round == 1 { secondDeferred = client.connectDeferredUntilWrite }
            if client.isConnecting {
                #expect(waitFor(client.fd, Int16(POLLOUT)))
                try client.finishConnect()
            }
            let message = Array("fast open \(round)".utf8)
            #expect(try message.withUnsafeBytes { try client.write($0) } == message.count)
            #expect(waitFor(listener.fd, Int16(POLLIN)))
            let server = try #require(try listener.accept())
            #expect(waitFor(server.fd, Int16(POLLIN)))
            var buffer = [UInt8](repeating: 0, count: 64)
            if case .bytes(let count) = try buffer.withUnsafeMutableBytes({ try server.read(into: $0) }) {
                delivered = Array(buffer[0..<count])
            }
            #expect(delivered == message)
            if round == 1 {
                // struct tcp_info: tcpi_options is its sixth byte; TCPI_OPT_SYN_DATA is 0x20.
                var info = [UInt8](repeating: 0, count: 256)
                var length = socklen_t(info.count)
                #expect(getsockopt(client.fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0)
                synData = info[5] & 0x20 != 0
            }
        }
        #expect(secondDeferred, "with the cookie, connect waits for the first write")
        #expect(synData, "the second connection's first bytes rode in its SYN")
    }
}
