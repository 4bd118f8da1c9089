// Connection setup baselines: `raw-handshake-client` opens N sequential TCP or TLS connections to
// `raw-handshake-server`, timing each until it is ready and until a 1-byte echo comes back.
// With `--concurrency C` (client) and `--threads T` (server), the rate instead: C client
// threads each open their share of N connections (connect and handshake, then close_notify and
// close), T server threads each accept, handshake and read to the end, one connection at a time.
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension RawBaselines {
    enum HandshakeServer {
        /// Connections served; read by the SIGTERM handler.
        private static let served = Atomic<Int>(0)

        static func run(_ options: Options) throws {
            let kind = try options.kind(allowed: [.tcp, .tls])
            let port = try options.port()
            var credentials: TLS.Credentials?
            if kind == .tls {
                credentials = try TLS.Credentials.server(
                    certificate: try options.string("cert"), key: try options.string("key"))
            }
            let listener = try Sockets.listener(port: port, backlog: 128)
            defer { close(listener) }
            // Runs until SIGTERM, which reports and exits 0 from the handler.
            signal(SIGTERM) { _ in RawBaselines.HandshakeServer.summarizeAndExit() }
            let threads = try options.int("threads", default: 1)
            if threads > 1 {
                // The rate mode: every thread accepts on the one listener and serves a
                // connection at a time (handshake, then read until the client closes).
                for _ in 0..<threads - 1 {
                    let sharedCredentials = credentials.map(SharedCredentials.init)
                    Thread { acceptAndDrain(listener, sharedCredentials?.credentials) }.start()
                }
                writeLine("listening \(try Sockets.localPort(listener))")
                acceptAndDrain(listener, credentials)
            }
            writeLine("listening \(try Sockets.localPort(listener))")

            let capacity = 16 << 10
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
            defer { buffer.deallocate() }
            var reply: UInt8 = 0x62
            while true {
                let fd = try Sockets.accept(listener)
                defer { close(fd) }
                try Sockets.disableNagle(fd)
                if let credentials {
                    let session = try TLS.Session.server(credentials, socket: fd)
                    try session.handshake()
                    guard try session.receive(buffer, 1) != nil else { throw Failure("client closed before its byte") }
                    _ = try session.sendAll(&reply, 1)
                    while try session.receive(buffer, capacity, closeIsEnd: true) != nil {}
                } else {
                    guard try Sockets.receive(fd, buffer, 1) != nil else { throw Failure("client closed before its byte") }
                    _ = try Sockets.sendAll(fd, &reply, 1)
                    while try Sockets.receive(fd, buffer, capacity) != nil {}
                }
                served.add(1, ordering: .relaxed)
            }
        }

        /// One rate-mode server thread's loop; a connection that fails is closed and the next one accepted.
        private static func acceptAndDrain(_ listener: Int32, _ credentials: TLS.Credentials?) -> Never {
            let capacity = 16 << 10
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
            while true {
                guard let fd = try? Sockets.accept(listener) else { continue }
                defer { close(fd) }
                try? Sockets.disableNagle(fd)
                if let credentials {
                    guard let session = try? TLS.Session.server(credentials, socket: fd), (try? session.handshake()) != nil else { continue }
                    while (try? session.receive(buffer, capacity, closeIsEnd: true)) != nil {}
                } else {
                    while (try? Sockets.receive(fd, buffer, capacity)) != nil {}
                }
                served.add(1, ordering: .relaxed)
            }
        }

        /// Async-signal-safe: formats `{"connections": N}` on the stack, writes it, exits 0.
        private static func summarizeAndExit() -> Never {
            var storage: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &storage) { line in
                var length = 0
                func append(_ byte: UInt8) {
                    line[length] = byte
                    length += 1
                }
                for byte in "{\"connections\": ".utf8 { append(byte) }
                var value = UInt(served.load(ordering: .relaxed))
                var divisor: UInt = 1
                while value / divisor >= 10 { divisor *= 10 }
                repeat {
                    append(UInt8(ascii: "0") + UInt8(value / divisor))
                    value %= divisor
                    divisor /= 10
                } while divisor > 0
                append(UInt8(ascii: "}"))
                append(UInt8(ascii: "\n"))
                _ = write(1, line.baseAddress, length)
            }
            _exit(0)
        }
    }

    enum HandshakeClient {
        static func run(_ options: Options) throws {
            let kind = try options.kind(allowed: [.tcp, .tls])
            let port = try options.port()
            guard port != 0 else { throw Failure("--port is required") }
            let count = try options.int("count")
            var credentials: TLS.Credentials?
            if kind == .tls { credentials = try TLS.Credentials.client(trusting: try options.string("ca")) }
            let serverName = options.optional("sni") ?? "localhost"
            let concurrency = try options.int("concurrency", default: 1)
            if concurrency > 1 {
                try rate(port: port, count: count, concurrency: concurrency, credentials: credentials, serverName: serverName)
                return
            }

            var ready: [UInt64] = []
            var firstByte: [UInt64] = []
            ready.reserveCapacity(count)
            firstByte.reserveCapacity(count)
            var request: UInt8 = 0x61
            var response: UInt8 = 0
            let cpuStart = processCPUNanoseconds()
            for _ in 0..<count {
                let start = now()
                let fd = try Sockets.make(stream: true)
                defer { close(fd) }
                try Sockets.disableNagle(fd)
                try Sockets.connectLoopback(fd, port: port)
                if let credentials {
                    let session = try TLS.Session.client(credentials, serverName: serverName, socket: fd)
                    try session.handshake()
                    ready.append(now() - start)
                    _ = try session.sendAll(&request, 1)
                    guard try session.receive(&response, 1) != nil else { throw Failure("server closed before replying") }
                    firstByte.append(now() - start)
                    try session.bye()
                } else {
                    ready.append(now() - start)
                    _ = try Sockets.sendAll(fd, &request, 1)
                    guard try Sockets.receive(fd, &response, 1) != nil else { throw Failure("server closed before replying") }
                    firstByte.append(now() - start)
                }
            }
            let readyList = ready.map(String.init).joined(separator: ", ")
            let firstByteList = firstByte.map(String.init).joined(separator: ", ")
            let cpu = processCPUNanoseconds() - cpuStart
            writeLine("{\"ready_ns\": [\(readyList)], \"first_byte_ns\": [\(firstByteList)], \"cpu_ns\": \(cpu)}")
        }

        /// The rate mode: `concurrency` threads each open their share of `count` connections,
        /// one at a time, each until ready (TCP connected; TLS handshake done), then close it.
        private static func rate(port: UInt16, count: Int, concurrency: Int, credentials: TLS.Credentials?, serverName: String) throws {
            let failures = Failures()
            let group = DispatchGroup()
            let shared = credentials.map(SharedCredentials.init)
            let start = now()
            for worker in 0..<concurrency {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        for _ in stride(from: worker, to: count, by: concurrency) {
                            let fd = try Sockets.make(stream: true)
                            defer { close(fd) }
                            try Sockets.disableNagle(fd)
                            try Sockets.connectLoopback(fd, port: port)
                            if let credentials = shared?.credentials {
                                let session = try TLS.Session.client(credentials, serverName: serverName, socket: fd)
                                try session.handshake()
                                try session.bye()
                            }
                        }
                    } catch {
                        failures.list.withLock { $0.append("\(error)") }
                    }
                }.start()
            }
            group.wait()
            let end = now()
            if let failure = failures.list.withLock({ $0.first }) { throw Failure(failure) }
            writeLine("{\"connections\": \(count), \"seconds\": \(jsonNumber(seconds(from: start, to: end)))}")
        }
    }

    /// Credentials that several threads use: GnuTLS only reads them once loaded.
    final class SharedCredentials: @unchecked Sendable {
        let credentials: TLS.Credentials
        init(_ credentials: TLS.Credentials) { self.credentials = credentials }
    }

    final class Failures: Sendable {
        let list = Mutex<[String]>([])
    }
}
