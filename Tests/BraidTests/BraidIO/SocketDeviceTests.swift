import BraidIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Sockets bound to an interface (SO_BINDTODEVICE), read back with getsockopt.
@Suite struct SocketDeviceTests {
    @Test func udpSocketsAndTheirAddressLookupsAreBoundToTheDevice() throws {
        let bound = try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, device: "lo")
        defer { bound.close() }
        #expect(SocketDevice.boundDevice(of: bound.fd) == "lo")
        let plain = try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        defer { plain.close() }
        #expect(SocketDevice.boundDevice(of: plain.fd) == nil)
        // The factory a constrained connection uses binds every socket it makes.
        let factory = try UDPSockets().boundToDevice("lo")
        #expect(try factory.localAddress(toward: SocketAddress(ip: "127.0.0.1", port: 9)!) == SocketAddress(ip: "127.0.0.1", port: 0)!)
        let made = try factory.bind(SocketAddress(ip: "127.0.0.1", port: 0)!, batching: .all, receiveSlots: 1, sendBatches: 1, reusePort: false)
        defer { made.close() }
        #expect((made as? UDPSocket).map { SocketDevice.boundDevice(of: $0.fd) } == "lo")
    }

    @Test func tcpClientSocketsAreBoundBeforeTheyConnect() throws {
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        defer { listener.close() }
        var options = TCPOptions()
        options.device = "lo"
        let socket = try TCPSocket.connect(to: listener.localAddress, options: options)
        defer { socket.close() }
        #expect(SocketDevice.boundDevice(of: socket.fd) == "lo")
    }

    @Test func anUnknownDeviceIsASystemError() {
        #expect(throws: DatapathError.system("setsockopt(SO_BINDTODEVICE braid-none0)", ENODEV)) {
            try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, device: "braid-none0")
        }
        #expect(throws: DatapathError.system("setsockopt(SO_BINDTODEVICE an-interface-name-too-long)", EINVAL)) {
            try UDPSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, device: "an-interface-name-too-long")
        }
    }
}
