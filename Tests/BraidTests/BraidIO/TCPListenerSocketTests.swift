import BraidIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The listening socket: SO_REUSEPORT groups, wildcard binds, and accept under descriptor
/// exhaustion.
@Suite struct TCPListenerSocketTests {
    /// Two listeners share a port with SO_REUSEPORT and the kernel spreads 24 connections
    /// over both; a third listener without it is refused the port.
    @Test func reusePortSharesOnePort() throws {
        let first = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: true)
        let second = try TCPListenerSocket(bindTo: first.localAddress, reusePort: true)
        #expect(second.localAddress == first.localAddress)
        #expect(throws: DatapathError.system("bind(\(first.localAddress))", EADDRINUSE)) {
            _ = try TCPListenerSocket(bindTo: first.localAddress)
        }
        var clients: [TCPSocket] = []
        for _ in 0..<24 {
            let client = try TCPSocket.connect(to: first.localAddress)
            #expect(waitFor(client.fd, Int16(POLLOUT)))
            try client.finishConnect()
            clients.append(client)
        }
        var counts = [0, 0]
        var accepted: [TCPSocket] = []
        // Accepts until every client is in, waiting on both sockets with a generous deadline.
        while counts[0] + counts[1] < clients.count {
            for (index, listener) in [first, second].enumerated() {
                while let socket = try listener.accept() {
                    counts[index] += 1
                    accepted.append(socket)
                }
            }
            guard counts[0] + counts[1] < clients.count else { break }
            var ready = [first.fd, second.fd].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&ready, 2, 60_000) > 0 else { break }
        }
        #expect(counts[0] + counts[1] == 24)
        #expect(counts[0] > 0 && counts[1] > 0, "the kernel spread connections over both sockets: \(counts)")
        #expect(first.counters.acceptWouldBlock > 0)
    }

    /// A listener on the IPv6 wildcard accepts an IPv4 client (reported as plain IPv4, not as
    /// the IPv4-mapped address the kernel gives) and applies IPv4 options to that connection too.
    @Test func ipv6WildcardAcceptsIPv4() throws {
        var options = TCPOptions()
        options.dscp = 10
        let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "::", port: 0)!, options: options)
        let client = try TCPSocket.connect(to: SocketAddress(ip: "127.0.0.1", port: listener.localAddress.port)!)
        #expect(waitFor(client.fd, Int16(POLLOUT)))
        try client.finishConnect()
        #expect(waitFor(listener.fd, Int16(POLLIN)))
        let server = try #require(try listener.accept())
        #expect(server.remoteAddress == client.localAddress)
        #expect(server.localAddress == SocketAddress(ip: "127.0.0.1", port: listener.localAddress.port)!)
        #expect(socketOption(server.fd, Int32(IPPROTO_IP), IP_TOS) == 10 << 2)
        #expect(socketOption(server.fd, Int32(IPPROTO_IPV6), IPV6_TCLASS) == 10 << 2)
    }

    /// When accept runs out of descriptors (EMFILE, injected: the real limit is the whole
    /// test process's), the listener stops being watched for a back-off instead of being
    /// reported readable on every pass of the level-triggered loop; once descriptors are
    /// back, the waiting connection is accepted.
    @Test func descriptorExhaustionDoesNotSpin() async throws {
        let loop = try EventLoop(name: "tcp-emfile")
        defer { loop.shutdown() }
        let outcome: (readableWhileExhausted: Int, pauses: UInt64, accepted: Bool) = try await loop.run(timeout: .seconds(60)) {
            context, finish in
            let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
            listener.exhaustionBackoff = .milliseconds(50)
            listener.injectedAcceptError = EMFILE
            let acceptor = Acceptor(listener)
            var accepted = false
            acceptor.onAccept = { socket in
                accepted = true
                socket.close()
            }
            _ = try listener.register(acceptor, in: context)
            let client = try TCPSocket.connect(to: listener.localAddress)
            // 300 ms exhausted: about six back-offs, so about six readable reports.
            context.schedule(at: context.now + .milliseconds(300)) { context in
                let readable = acceptor.readableCalls
                let pauses = listener.counters.acceptPauses
                listener.injectedAcceptError = nil
                context.schedule(at: context.now + .milliseconds(200)) { _ in
                    finish(.success((readable, pauses, accepted)))
                    client.close()
                    listener.close()
                }
            }
        }
        #expect(outcome.readableWhileExhausted >= 2, "the listener is retried after each back-off")
        #expect(outcome.readableWhileExhausted <= 10, "a spinning loop would report it thousands of times")
        #expect(outcome.pauses == UInt64(outcome.readableWhileExhausted))
        #expect(outcome.accepted)
    }
}
