import BraidIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Lets a test hand loop-confined state to a virtual loop it drives itself on this thread.
private struct OnThisThread<Value>: @unchecked Sendable {
    let value: Value
}

extension EventLoop {
    /// A virtual loop: runs `body` on it now (on this thread) and everything it leads to.
    fileprivate func runNow(_ body: @escaping (LoopContext) -> Void) {
        let box = OnThisThread(value: body)
        execute { box.value($0) }
        runPending()
    }
}

/// The in-memory byte stream (`MemoryStreamNetwork`) the connection owners' tests run on:
/// bounded buffers, level-triggered readiness through a virtual loop, end of stream, reset,
/// refusal.
@Suite(.ownThread) struct MemoryByteStreamTests {
    private func virtualLoop() throws -> EventLoop {
        try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
    }

    /// 1 MB through a pair whose directions hold 16 KiB: writes come back short (backpressure),
    /// the receiver never holds more than the bound, and every byte arrives in order.
    @Test func boundedTransferIsIntact() throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let (a, b) = MemoryStreamNetwork.pair(capacity: 16 * 1024)
        let sender = StreamSender(socket: a, total: 1 << 20, connected: true)
        let receiver = StreamReceiver(socket: b)
        var finished = false
        sender.onFinished = { try? a.shutdownWrite() }
        receiver.onProgress = { if $0.endOfStream { finished = true } }
        loop.runNow { context in
            _ = try? a.register(sender, in: context)
            a.setWantsReadable(false)
            _ = try? b.register(receiver, in: context)
            sender.pump()
        }
        #expect(finished)
        #expect(receiver.received == 1 << 20)
        #expect(receiver.intact)
        #expect(sender.shortWrites > 0)
        #expect(b.peakBuffered == 16 * 1024)
        #expect(a.counters.bytesSent == 1 << 20)
        #expect(b.counters.readEndOfStream == 1)
    }

    /// With the reader's interest off, the writer gets exactly the bound in, then 0; back on,
    /// the rest flows.
    @Test func readInterestOffStopsTheWriter() throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let (a, b) = MemoryStreamNetwork.pair(capacity: 4096)
        let sender = StreamSender(socket: a, total: 20000, connected: true)
        let receiver = StreamReceiver(socket: b)
        loop.runNow { context in
            _ = try? a.register(sender, in: context)
            a.setWantsReadable(false)
            _ = try? b.register(receiver, in: context)
            b.setWantsReadable(false)
            sender.pump()
        }
        #expect(sender.offset == 4096)
        #expect(receiver.readableCalls == 0)
        loop.runNow { _ in sender.pump() }
        #expect(sender.zeroWrites >= 1)
        #expect(sender.offset == 4096)
        loop.runNow { _ in b.setWantsReadable(true) }
        #expect(receiver.received == 20000)
        #expect(receiver.intact)
    }

    /// Half-close carries end of stream while the other way stays open; abort resets the peer.
    @Test func endOfStreamAndReset() throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let (a, b) = MemoryStreamNetwork.pair(capacity: 1024)
        var buffer = [UInt8](repeating: 0, count: 64)
        var bSaw: [StreamReadResult] = []
        var aSaw: [StreamReadResult] = []
        var aError: DatapathError?
        let aHandler = ClosureHandler()
        let bHandler = ClosureHandler()
        aHandler.onReadable = { _ in
            do {
                let result = try buffer.withUnsafeMutableBytes { try a.read(into: $0) }
                aSaw.append(result)
            } catch {
                aError = error as? DatapathError
                a.setWantsReadable(false)
            }
        }
        bHandler.onReadable = { _ in
            let result = try? buffer.withUnsafeMutableBytes { try b.read(into: $0) }
            if let result { bSaw.append(result) }
            if result == .endOfStream {
                b.setWantsReadable(false)
                _ = try? Array("back".utf8).withUnsafeBytes { try b.write($0) }
            }
        }
        loop.runNow { context in
            _ = try? a.register(aHandler, in: context)
            _ = try? b.register(bHandler, in: context)
            _ = try? Array("hi".utf8).withUnsafeBytes { try a.write($0) }
            try? a.shutdownWrite()
        }
        #expect(bSaw == [.bytes(2), .endOfStream])
        #expect(aSaw == [.bytes(4)])
        #expect(throws: DatapathError.system("sendmsg", EPIPE)) { try Array("x".utf8).withUnsafeBytes { try a.write($0) } }
        loop.runNow { _ in b.abort() }
        #expect(aError == .system("recv", ECONNRESET))
        #expect(aError?.isResetByPeer == true)
    }

    /// Through the factory: a connect to an address with a listener is accepted after the
    /// network's delay (the accepted socket names the client), one to an address without is
    /// refused with ECONNREFUSED at finishConnect.
    @Test func factoryConnectsAndRefuses() throws {
        let loop = try virtualLoop()
        defer { loop.shutdown() }
        let network = MemoryStreamNetwork(loop: loop, delay: .milliseconds(10))
        let factory: any ByteStreamSocketFactory = network
        let listener = try factory.listen(on: SocketAddress(ip: "127.0.0.1", port: 443)!, options: TCPOptions(), reusePort: false, backlog: 16)
        #expect(throws: DatapathError.system("bind(127.0.0.1:443)", EADDRINUSE)) {
            _ = try factory.listen(on: SocketAddress(ip: "127.0.0.1", port: 443)!, options: TCPOptions(), reusePort: false, backlog: 16)
        }
        let acceptor = Acceptor(listener)
        var accepted: [any ByteStreamSocket] = []
        acceptor.onAccept = { accepted.append($0) }
        let client = try factory.connect(to: listener.localAddress, from: nil, options: TCPOptions())
        let refused = try factory.connect(to: SocketAddress(ip: "127.0.0.1", port: 444)!, from: nil, options: TCPOptions())
        var outcomes: [String] = []
        func connector(_ socket: any ByteStreamSocket) -> ClosureHandler {
            let handler = ClosureHandler()
            handler.onWritable = { _ in
                socket.setWantsWritable(false)
                do {
                    try socket.finishConnect()
                    outcomes.append("\(socket.remoteAddress.port) connected")
                } catch {
                    outcomes.append("\(socket.remoteAddress.port) \(error)")
                }
            }
            return handler
        }
        let clientHandler = connector(client)
        let refusedHandler = connector(refused)
        loop.runNow { context in
            _ = try? listener.register(acceptor, in: context)
            _ = try? client.register(clientHandler, in: context)
            client.setWantsWritable(true)
            _ = try? refused.register(refusedHandler, in: context)
            refused.setWantsWritable(true)
        }
        #expect(outcomes.isEmpty, "nothing before the network's delay")
        loop.advance(by: .milliseconds(10))
        #expect(outcomes.sorted() == ["443 connected", "444 \(DatapathError.system("connect(127.0.0.1:444)", ECONNREFUSED))"])
        #expect(accepted.count == 1)
        #expect(accepted.first?.remoteAddress == client.localAddress)
    }
}
