import BraidIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Echoes what it reads; what the socket does not take waits for writable. Closes on end of stream.
private final class EchoConnection: LoopHandler {
    let socket: any ByteStreamSocket
    private var buffer = [UInt8](repeating: 0, count: 65536)
    private var pending: [UInt8] = []

    init(_ socket: any ByteStreamSocket) { self.socket = socket }

    func readable(_ context: LoopContext) {
        while pending.isEmpty {
            let result = buffer.withUnsafeMutableBytes { try? socket.read(into: $0) }
            switch result {
            case .bytes(let count)?:
                pending = Array(buffer[0..<count])
                flush()
            case .endOfStream?, nil:
                socket.close()
                return
            case .wouldBlock?:
                return
            }
        }
        // Not reading until what we owe is written (the peer's window stops it meanwhile).
        socket.setWantsReadable(false)
    }

    func writable(_ context: LoopContext) {
        flush()
        if pending.isEmpty { socket.setWantsReadable(true) }
    }

    private func flush() {
        let written = pending.withUnsafeBytes { (try? socket.write($0)) ?? 0 }
        pending.removeFirst(written)
        socket.setWantsWritable(!pending.isEmpty)
    }

    func timerFired(_ context: LoopContext) {}
    func close(_ context: LoopContext) { socket.close() }
}

extension ByteStreamSocket {
    /// One write of one region.
    func write(_ bytes: UnsafeRawBufferPointer) throws -> Int { try write { $0.append(bytes) } }
}

/// TCP sockets over loopback, on a real event loop.
@Suite struct TCPSocketTests {
    /// Connect, accept and an echo of 200 KiB, over IPv4 and IPv6, through one loop: the echo
    /// comes back intact and the counters saw every byte.
    @Test(arguments: ["127.0.0.1", "::1"])
    func echoOverLoopback(ip: String) async throws {
        let loop = try EventLoop(name: "tcp-echo")
        defer { loop.shutdown() }
        let total = 200 * 1024
        let outcome: (received: Int, intact: Bool, bytesWritten: UInt64, bytesRead: UInt64, remoteMatches: Bool) =
            try await loop.run(timeout: .seconds(60)) { context, finish in
                let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: ip, port: 0)!)
                let acceptor = Acceptor(listener)
                acceptor.onAccept = { socket in _ = try? socket.register(EchoConnection(socket), in: context) }
                _ = try listener.register(acceptor, in: context)

                let socket = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions())
                let sender = StreamSender(socket: socket, total: total, connected: false)
                let receiver = StreamReceiver(socket: socket)
                let both = ClosureHandler()
                both.onWritable = { sender.writable($0) }
                both.onReadable = { receiver.readable($0) }
                sender.onError = { finish(.failure($0)) }
                receiver.onError = { finish(.failure($0)) }
                receiver.onProgress = { receiver in
                    guard receiver.received >= total else { return }
                    finish(.success((
                        receiver.received, receiver.intact, socket.counters.bytesSent, socket.counters.bytesReceived,
                        socket.remoteAddress == listener.localAddress
                    )))
                    socket.close()
                    listener.close()
                }
                _ = try socket.register(both, in: context)
                socket.setWantsWritable(true)
            }
        #expect(outcome.received == total)
        #expect(outcome.intact)
        #expect(outcome.bytesWritten == UInt64(total))
        #expect(outcome.bytesRead == UInt64(total))
        #expect(outcome.remoteMatches)
    }

    /// 10 MB in gathered writes of several uneven regions, checked byte by byte at the
    /// receiver; writes that the full socket cut short resume on writable.
    @Test func tenMegabytesInGatheredWrites() async throws {
        let loop = try EventLoop(name: "tcp-10mb")
        defer { loop.shutdown() }
        let total = 10 * 1024 * 1024
        let outcome: (received: Int, intact: Bool, end: Bool, sender: SocketCounters) = try await loop.run(timeout: .seconds(60)) {
            context, finish in
            let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
            var receiver: StreamReceiver?
            let acceptor = Acceptor(listener)
            let socket = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions(sendBufferSize: 64 * 1024))
            let sender = StreamSender(socket: socket, total: total, connected: false)
            sender.onError = { finish(.failure($0)) }
            sender.onFinished = { try? socket.shutdownWrite() }
            acceptor.onAccept = { accepted in
                let reader = StreamReceiver(socket: accepted)
                reader.onError = { finish(.failure($0)) }
                reader.onProgress = { reader in
                    guard reader.endOfStream else { return }
                    finish(.success((reader.received, reader.intact, reader.endOfStream, socket.counters)))
                    accepted.close()
                    socket.close()
                    listener.close()
                }
                receiver = reader
                _ = try? accepted.register(reader, in: context)
            }
            _ = try listener.register(acceptor, in: context)
            _ = try socket.register(sender, in: context)
            socket.setWantsReadable(false)
            socket.setWantsWritable(true)
            _ = receiver
        }
        #expect(outcome.received == total)
        #expect(outcome.intact)
        #expect(outcome.end)
        #expect(outcome.sender.bytesSent == UInt64(total))
        // Several regions per system call, every call counted.
        #expect(outcome.sender.regionsWritten > outcome.sender.sendmsgCalls * 2)
        #expect(outcome.sender.partialWrites > 0)
    }

    /// With the receiver's read interest off, the sender fills both socket buffers: its writes
    /// come back short and then 0, and what the kernel took stays bounded (no unbounded
    /// buffering anywhere). With the interest back on, everything arrives intact.
    @Test func readInterestOffStopsTheSenderAndOnResumes() async throws {
        let loop = try EventLoop(name: "tcp-backpressure")
        defer { loop.shutdown() }
        let total = 8 * 1024 * 1024
        let buffer = 64 * 1024
        let outcome: (acceptedWhilePaused: Int, zeroWrites: Int, readsWhilePaused: Int, received: Int, intact: Bool) =
            try await loop.run(timeout: .seconds(60)) { context, finish in
                let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, options: TCPOptions(receiveBufferSize: buffer))
                let socket = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions(sendBufferSize: buffer))
                let sender = StreamSender(socket: socket, total: total, connected: false)
                sender.stopAtFirstShortWrite = true
                sender.onError = { finish(.failure($0)) }
                var reader: StreamReceiver?
                let acceptor = Acceptor(listener)
                acceptor.onAccept = { accepted in
                    let receiver = StreamReceiver(socket: accepted)
                    reader = receiver
                    receiver.onError = { finish(.failure($0)) }
                    _ = try? accepted.register(receiver, in: context)
                    // The application is not reading.
                    accepted.setWantsReadable(false)
                }
                _ = try listener.register(acceptor, in: context)
                _ = try socket.register(sender, in: context)
                socket.setWantsReadable(false)
                socket.setWantsWritable(true)

                // Keep the sender pushing until the kernel takes nothing more.
                func pushUntilFull(_ context: LoopContext) {
                    guard let receiver = reader, sender.connected else {
                        context.schedule(at: context.now + .milliseconds(5), pushUntilFull)
                        return
                    }
                    if sender.stoppedShort { sender.resume(stoppingShort: true) }
                    guard sender.zeroWrites >= 3 else {
                        context.schedule(at: context.now + .milliseconds(20), pushUntilFull)
                        return
                    }
                    let acceptedWhilePaused = sender.offset
                    let readsWhilePaused = receiver.readableCalls
                    receiver.onProgress = { receiver in
                        guard receiver.received >= total else { return }
                        finish(.success((acceptedWhilePaused, sender.zeroWrites, readsWhilePaused, receiver.received, receiver.intact)))
                        socket.close()
                        receiver.socket.close()
                        listener.close()
                    }
                    // The application reads again; the sender carries on as the window opens.
                    receiver.socket.setWantsReadable(true)
                    sender.resume()
                }
                context.schedule(at: context.now + .milliseconds(5), pushUntilFull)
            }
        #expect(outcome.zeroWrites >= 3)
        #expect(outcome.readsWhilePaused == 0)
        // Both buffers and the window, well under the 8 MB offered.
        #expect(outcome.acceptedWhilePaused > 0 && outcome.acceptedWhilePaused < 4 * 1024 * 1024)
        #expect(outcome.received == total)
        #expect(outcome.intact)
    }

    /// A connect to a port nobody listens on fails in `finishConnect` with ECONNREFUSED.
    @Test func refusedConnectIsTyped() async throws {
        let loop = try EventLoop(name: "tcp-refused")
        defer { loop.shutdown() }
        let closedPort = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
        let address = closedPort.localAddress
        closedPort.close()
        let error: DatapathError? = try await loop.run(timeout: .seconds(60)) { context, finish in
            let socket = try TCPSocket.connect(to: address, options: TCPOptions())
            let handler = ClosureHandler()
            handler.onWritable = { _ in
                do {
                    try socket.finishConnect()
                    finish(.success(nil))
                } catch {
                    finish(.success(error as? DatapathError))
                }
                socket.close()
            }
            _ = try socket.register(handler, in: context)
            socket.setWantsReadable(false)
            socket.setWantsWritable(true)
        }
        #expect(error == .system("connect(\(address))", ECONNREFUSED))
        #expect(error?.isResetByPeer == false)
    }

    /// Half-close: after our shutdownWrite the peer reads our bytes then end of stream, and can
    /// still answer; we read the answer, then its end of stream.
    @Test func halfCloseLetsThePeerAnswer() async throws {
        let loop = try EventLoop(name: "tcp-half-close")
        defer { loop.shutdown() }
        let outcome: (serverGot: [UInt8], serverSawEnd: Bool, clientGot: [UInt8], clientSawEnd: Bool) = try await loop.run(timeout: .seconds(60)) {
            context, finish in
            let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
            var serverGot: [UInt8] = []
            var serverSawEnd = false
            var clientGot: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1024)
            let acceptor = Acceptor(listener)
            acceptor.onAccept = { accepted in
                let handler = ClosureHandler()
                handler.onReadable = { _ in
                    while true {
                        let result = buffer.withUnsafeMutableBytes { try? accepted.read(into: $0) }
                        switch result {
                        case .bytes(let count)?: serverGot += buffer[0..<count]
                        case .endOfStream?:
                            serverSawEnd = true
                            accepted.setWantsReadable(false)
                            // Still able to send after the peer's FIN.
                            _ = Array("world".utf8).withUnsafeBytes { try? accepted.write($0) }
                            try? accepted.shutdownWrite()
                            return
                        default: return
                        }
                    }
                }
                _ = try? accepted.register(handler, in: context)
            }
            _ = try listener.register(acceptor, in: context)

            let socket = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions())
            let client = ClosureHandler()
            client.onWritable = { _ in
                do {
                    try socket.finishConnect()
                    _ = try Array("hello".utf8).withUnsafeBytes { try socket.write($0) }
                    try socket.shutdownWrite()
                } catch {
                    finish(.failure(error))
                }
                socket.setWantsWritable(false)
            }
            client.onReadable = { _ in
                while true {
                    let result = buffer.withUnsafeMutableBytes { try? socket.read(into: $0) }
                    switch result {
                    case .bytes(let count)?: clientGot += buffer[0..<count]
                    case .endOfStream?:
                        finish(.success((serverGot, serverSawEnd, clientGot, true)))
                        socket.close()
                        listener.close()
                        return
                    default: return
                    }
                }
            }
            _ = try socket.register(client, in: context)
            socket.setWantsWritable(true)
        }
        #expect(outcome.serverGot == Array("hello".utf8))
        #expect(outcome.serverSawEnd)
        #expect(outcome.clientGot == Array("world".utf8))
        #expect(outcome.clientSawEnd)
    }

    /// A peer that closes with SO_LINGER 0 resets the connection: our read fails with
    /// ECONNRESET (`isResetByPeer`), and a write after it with EPIPE, never SIGPIPE.
    @Test func resetByPeerIsTyped() async throws {
        let loop = try EventLoop(name: "tcp-reset")
        defer { loop.shutdown() }
        let outcome: (read: DatapathError?, write: DatapathError?) = try await loop.run(timeout: .seconds(60)) { context, finish in
            let listener = try TCPListenerSocket(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!)
            let socket = try TCPSocket.connect(to: listener.localAddress, options: TCPOptions())
            let acceptor = Acceptor(listener)
            // The server resets once the client has seen the connection established (a reset
            // before would be reported by finishConnect instead).
            var accepted: (any ByteStreamSocket)?
            var clientConnected = false
            acceptor.onAccept = { socket in
                accepted = socket
                if clientConnected { socket.abort() }
            }
            _ = try listener.register(acceptor, in: context)
            let client = ClosureHandler()
            var buffer = [UInt8](repeating: 0, count: 1024)
            client.onWritable = { _ in
                do {
                    try socket.finishConnect()
                } catch {
                    finish(.failure(error))
                }
                socket.setWantsWritable(false)
                clientConnected = true
                accepted?.abort()
            }
            client.onReadable = { _ in
                var readError: DatapathError?
                do {
                    guard try buffer.withUnsafeMutableBytes({ try socket.read(into: $0) }) != .wouldBlock else { return }
                } catch {
                    readError = error as? DatapathError
                }
                var writeError: DatapathError?
                do {
                    _ = try buffer.withUnsafeBytes { try socket.write($0) }
                } catch {
                    writeError = error as? DatapathError
                }
                finish(.success((readError, writeError)))
                socket.close()
                listener.close()
            }
            _ = try socket.register(client, in: context)
            socket.setWantsWritable(true)
        }
        #expect(outcome.read == .system("recv", ECONNRESET))
        #expect(outcome.read?.isResetByPeer == true)
        #expect(outcome.write == .system("sendmsg", EPIPE))
        #expect(outcome.write?.isResetByPeer == true)
    }
}
