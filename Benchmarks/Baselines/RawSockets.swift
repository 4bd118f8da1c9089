// Thin, blocking socket helpers over Glibc for the raw baselines: IPv4 only.
#if canImport(Glibc)
import Glibc
#endif

extension RawBaselines {
    enum Sockets {
        // From <netinet/udp.h>, which the Glibc module does not export.
        static let solUDP: Int32 = 17
        static let udpSegment: Int32 = 103
        static let udpGRO: Int32 = 104

        /// Receive buffer the datagram servers ask for, so a burst from the sender is not dropped at once.
        static let datagramReceiveBuffer: Int32 = 8 << 20

        static func check(_ rc: Int32, _ call: @autoclosure () -> String) throws {
            if rc < 0 { throw Failure.system(call()) }
        }

        /// An IPv4 stream or datagram socket.
        static func make(stream: Bool) throws -> Int32 {
            let type = stream ? SOCK_STREAM : SOCK_DGRAM
            let fd = socket(AF_INET, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try check(fd, "socket")
            return fd
        }

        /// The address servers bind and clients connect to: 127.0.0.1, or $BRAID_BENCH_HOST
        /// when the harness runs the two ends in network namespaces behind an emulated delay.
        static var host: String { getenv("BRAID_BENCH_HOST").map { String(cString: $0) } ?? "127.0.0.1" }

        static func loopback(port: UInt16) -> sockaddr_in {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr(host)
            return address
        }

        static func bindLoopback(_ fd: Int32, port: UInt16) throws {
            var address = loopback(port: port)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try check(rc, "bind \(host):\(port)")
        }

        static func connectLoopback(_ fd: Int32, port: UInt16) throws {
            var address = loopback(port: port)
            var rc: Int32
            repeat {
                rc = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            } while rc < 0 && errno == EINTR
            try check(rc, "connect \(host):\(port)")
        }

        static func localPort(_ fd: Int32) throws -> UInt16 {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let rc = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            try check(rc, "getsockname")
            return UInt16(bigEndian: address.sin_port)
        }

        @discardableResult
        static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) -> Bool {
            var value = value
            return setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
        }

        static func setReceiveTimeout(_ fd: Int32, seconds: Int) throws {
            var timeout = timeval(tv_sec: seconds, tv_usec: 0)
            try check(
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)),
                "setsockopt SO_RCVTIMEO")
        }

        /// 8 MiB receive buffer: SO_RCVBUFFORCE (root may exceed rmem_max), else SO_RCVBUF; failure is fine.
        static func enlargeReceiveBuffer(_ fd: Int32) {
            if !setOption(fd, SOL_SOCKET, SO_RCVBUFFORCE, datagramReceiveBuffer) {
                setOption(fd, SOL_SOCKET, SO_RCVBUF, datagramReceiveBuffer)
            }
        }

        static func disableNagle(_ fd: Int32) throws {
            guard setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1) else { throw Failure.system("setsockopt TCP_NODELAY") }
        }

        /// A TCP socket listening on 127.0.0.1:`port` (0: any free port).
        static func listener(port: UInt16, backlog: Int32) throws -> Int32 {
            let fd = try make(stream: true)
            setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            try bindLoopback(fd, port: port)
            try check(listen(fd, backlog), "listen")
            return fd
        }

        static func accept(_ listener: Int32) throws -> Int32 {
            while true {
                let fd = Glibc.accept(listener, nil, nil)
                if fd >= 0 { return fd }
                if errno != EINTR && errno != ECONNABORTED { throw Failure.system("accept") }
            }
        }

        /// Writes all `count` bytes; returns the number of send calls made.
        static func sendAll(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) throws -> Int {
            var offset = 0
            var calls = 0
            while offset < count {
                let sent = send(fd, bytes + offset, count - offset, Int32(MSG_NOSIGNAL))
                calls += 1
                if sent < 0 {
                    if errno == EINTR { continue }
                    throw Failure.system("send")
                }
                offset += sent
            }
            return calls
        }

        /// One recv; nil at end of stream.
        static func receive(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ capacity: Int) throws -> Int? {
            while true {
                let received = recv(fd, buffer, capacity, 0)
                if received > 0 { return received }
                if received == 0 { return nil }
                if errno != EINTR { throw Failure.system("recv") }
            }
        }

        /// Reads and discards until the peer closes.
        static func drain(_ fd: Int32) throws {
            var scratch: UInt64 = 0
            while try withUnsafeMutableBytes(of: &scratch, { try receive(fd, $0.baseAddress!, $0.count) }) != nil {}
        }
    }
}
