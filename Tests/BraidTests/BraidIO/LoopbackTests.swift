import BraidIO
import BraidPerf
import BraidQUIC
import BraidQUICIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A server driver on one loop and clients on another, over real UDP sockets on loopback.
private final class Loopback: Sendable {
    let serverLoop: EventLoop
    let clientLoop: EventLoop

    init() throws {
        serverLoop = try EventLoop(name: "test-server")
        clientLoop = try EventLoop(name: "test-client")
    }

    deinit {
        serverLoop.shutdown()
        clientLoop.shutdown()
    }

    /// Starts a server on 127.0.0.1 with an ephemeral port; `makeApplication` runs on the
    /// server loop and returns the event handler.
    func startServer(
        batching: BatchingOptions = .all, alpn: [String] = ["perf"],
        makeApplication: @escaping @Sendable () -> QUICEventHandler
    ) async throws -> (address: QUICAddress, driver: LoopBound<QUICServerDriver>) {
        try await serverLoop.submit { context in
            let driver = try QUICServerDriver(
                context: context, endpoint: Fixtures.server(alpn: alpn) { $0.transport.useTestTimeouts() }, bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!,
                batching: batching, onEvent: makeApplication())
            return (driver.localAddress, LoopBound(driver, on: context.loop))
        }
    }

    /// A server running the `echo` application.
    func startEchoServer() async throws -> (address: QUICAddress, driver: LoopBound<QUICServerDriver>) {
        try await startServer(alpn: ["echo"]) { EchoServer().handle }
    }

    func serverCounters(_ driver: LoopBound<QUICServerDriver>) async throws -> SocketCounters {
        try await serverLoop.submit { _ in driver.value.socket.counters }
    }

    /// Downloads `size` perf bytes; returns whether they arrived intact and the client's counters.
    func download(size: Int, from server: QUICAddress, batching: BatchingOptions = .all) async throws
        -> (intact: Bool, counters: SocketCounters)
    {
        try await clientLoop.run(timeout: .seconds(120)) { context, finish in
            let download = PerfDownload(size: size)
            let driver = try QUICClientDriver(
                context: context, client: Fixtures.client(alpn: ["perf"]) { $0.transport.useTestTimeouts() }, remote: server, serverName: "localhost",
                batching: batching) { connection, event in download.handle(connection, event) }
            download.onFinished = { intact in
                finish(.success((intact, driver.socket.counters)))
                driver.connection.close(now: context.now)
                driver.service(context)
            }
        }
    }
}

@Suite(.serialized) struct LoopbackTests {
    @Test func handshakeOverRealSockets() async throws {
        let loopback = try Loopback()
        let (address, _) = try await loopback.startServer(alpn: ["echo"]) { { _, _ in } }
        let outcome: (alpn: String?, local: String, remote: String) = try await loopback.clientLoop.run(timeout: .seconds(60)) {
            context, finish in
            var driver: QUICClientDriver?
            driver = try QUICClientDriver(
                context: context, client: Fixtures.client(alpn: ["echo"]) { $0.transport.useTestTimeouts() }, remote: address, serverName: "localhost"
            ) { connection, event in
                switch event {
                case .handshakeCompleted:
                    finish(.success((connection.negotiatedALPN, connection.path.local.description, connection.path.remote.description)))
                    connection.close(now: context.now)
                    driver?.service(context)
                case .connectionClosed(let error):
                    finish(.failure(error))
                default: break
                }
            }
        }
        #expect(outcome.alpn == "echo")
        #expect(outcome.local.hasPrefix("127.0.0.1:"))
        #expect(outcome.remote == address.description)
    }

    /// 100 MB with all batching on and with all of it off: byte-identical both times, and the
    /// library-counted syscalls (both ends) with batching are under a tenth of those without.
    @Test func bulkTransferWithAndWithoutBatching() async throws {
        let size = 100 * 1024 * 1024
        var syscalls: [Bool: UInt64] = [:]
        for batched in [true, false] {
            let batching: BatchingOptions = batched ? .all : .none
            let loopback = try Loopback()
            let (address, server) = try await loopback.startServer(batching: batching) {
                let perf = PerfServer()
                return perf.handle
            }
            let (intact, client) = try await loopback.download(size: size, from: address, batching: batching)
            let serverSide = try await loopback.serverCounters(server)
            #expect(intact, "100 MB arrived altered or short (batching \(batching))")
            syscalls[batched] = client.syscalls + serverSide.syscalls
            if batched {
                #expect(serverSide.gsoBatches > 0 && serverSide.sendmmsgCalls + serverSide.sendmsgCalls > 0)
                #expect(client.recvmmsgCalls > 0 && client.recvmsgCalls == 0)
                // ECN: ngtcp2 keeps marking only after validating that marks come back in ACKs.
                #expect(client.ecnMarkedReceived > 1000, "ECN validation failed: \(client.ecnMarkedReceived) marked")
            } else {
                #expect(serverSide.gsoBatches == 0 && serverSide.sendmmsgCalls == 0)
                #expect(client.recvmmsgCalls == 0 && client.groMessages == 0)
            }
            #expect(client.truncatedMessages == 0 && serverSide.truncatedMessages == 0)
        }
        let with = try #require(syscalls[true]), without = try #require(syscalls[false])
        #expect(with * 10 < without, "syscalls with batching \(with), without \(without)")
    }

    @Test func datagramsAreEchoed() async throws {
        let loopback = try Loopback()
        let (address, _) = try await loopback.startEchoServer()
        let count = 200
        let echoed: [[UInt8]] = try await loopback.clientLoop.run(timeout: .seconds(60)) { context, finish in
            var received: [[UInt8]] = []
            var driver: QUICClientDriver?
            driver = try QUICClientDriver(
                context: context, client: Fixtures.client(alpn: ["echo"]) { $0.transport.useTestTimeouts() }, remote: address, serverName: "localhost"
            ) { connection, event in
                switch event {
                case .handshakeCompleted:
                    for index in 0..<count { _ = try? connection.sendDatagram(PerfPattern.slice(at: index * 1000, count: 1000).map { $0 }) }
                case .datagramReceived(let bytes, _):
                    received.append(bytes)
                    if received.count == count {
                        finish(.success(received))
                        connection.close(now: context.now)
                        driver?.service(context)
                    }
                default: break
                }
            }
        }
        #expect(Set(echoed) == Set((0..<count).map { PerfPattern.slice(at: $0 * 1000, count: 1000).map { $0 } }))
    }

    @Test func twoHundredClientsShareOneServerSocket() async throws {
        let loopback = try Loopback()
        let (address, server) = try await loopback.startEchoServer()
        let clients = 200
        let intact: Int = try await loopback.clientLoop.run(timeout: .seconds(60)) { context, finish in
            var drivers: [QUICClientDriver] = []
            var done = 0
            var good = 0
            let clientContext = try Fixtures.client(alpn: ["echo"]) { $0.transport.useTestTimeouts() }
            for index in 0..<clients {
                let payload = Array(PerfPattern.slice(at: index * 4096, count: 4096))
                var echoed: [UInt8] = []
                var stream: Int64?
                let driver = try QUICClientDriver(
                    context: context, client: clientContext, remote: address, serverName: "localhost", receiveSlots: 2
                ) { connection, event in
                    switch event {
                    case .handshakeCompleted:
                        stream = try? connection.openStream(bidirectional: true)
                        if let stream { try? connection.send(streamID: stream, bytes: payload, fin: true) }
                    case .streamReadable(let id) where id == stream:
                        while let read = try? connection.read(streamID: id) {
                            echoed += read.bytes
                            if read.fin {
                                done += 1
                                if echoed == payload { good += 1 }
                                if done == clients { finish(.success(good)) }
                                return
                            }
                            if read.bytes.isEmpty { break }
                        }
                    default: break
                    }
                }
                drivers.append(driver)
            }
            _ = drivers
        }
        #expect(intact == clients)
        let served = try await loopback.serverCounters(server)
        #expect(served.datagramsReceived >= UInt64(clients * 2))
    }

    /// GSO failing with EIO (what a device without checksum offload reports) makes the socket
    /// fall back to one datagram per message; the transfer completes intact.
    @Test func segmentationFailureFallsBack() async throws {
        let loopback = try Loopback()
        let (address, server) = try await loopback.startServer {
            let perf = PerfServer()
            return perf.handle
        }
        try await loopback.serverLoop.submit { _ in (server.value.socket as! UDPSocket).injectedSegmentationErrors = [EIO] }
        let (intact, _) = try await loopback.download(size: 5 * 1024 * 1024, from: address)
        #expect(intact)
        let (counters, batching) = try await loopback.serverLoop.submit { _ in (server.value.socket.counters, (server.value.socket as! UDPSocket).batching) }
        #expect(counters.gsoFallbacks == 1)
        #expect(!batching.segmentationOffload)
    }

    /// A server on two loops (SO_REUSEPORT + connection-ID steering): 16 clients each migrate
    /// to a new port mid-download. The 4-tuple hash would send about half of them to the loop
    /// that does not know them (a stateless reset would end the connection); steering keeps
    /// every one on its loop, and all downloads complete intact. The same with connection IDs
    /// laid out for a load balancer, where the loop tag follows the balancer's part.
    @Test(arguments: [
        QUICConnectionIDFormat.random,
        .quicLB(QUICLBConfiguration(configRotation: 1, serverID: [7, 7, 7], nonceLength: 6, key: Array(0..<16))),
        .katran(.v3, serverID: 0x0102_0304),
    ])
    func serverGroupKeepsMigratingClientsOnTheirLoops(connectionIDFormat: QUICConnectionIDFormat) async throws {
        let loopback = try Loopback()
        let secondServerLoop = try EventLoop(name: "test-server-2")
        defer { secondServerLoop.shutdown() }
        var configuration = Fixtures.serverConfiguration(alpn: ["perf"])
        configuration.transport.useTestTimeouts()
        configuration.connectionIDFormat = connectionIDFormat
        let group = try await QUICServerGroup.start(
            loops: [loopback.serverLoop, secondServerLoop], configuration: configuration,
            bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!
        ) { _, _ in PerfServer().handle }
        let clients = 16, size = 2 * 1024 * 1024
        struct Outcome: Sendable { var intact: Bool; var portBefore: UInt16?; var portAfter: UInt16 }
        /// One client's download and where it migrated from.
        final class MigratingClient {
            let download: PerfDownload
            /// The loop's registration keeps the driver alive; the driver's handler keeps this.
            weak var driver: QUICClientDriver?
            var portBefore: UInt16?
            init(size: Int) { download = PerfDownload(size: size) }
        }
        let outcomes: [Outcome] = try await loopback.clientLoop.run(timeout: .seconds(60)) { context, finish in
            var outcomes: [Outcome] = []
            let clientContext = try Fixtures.client(alpn: ["perf"]) { $0.transport.useTestTimeouts() }
            for _ in 0..<clients {
                let client = MigratingClient(size: size)
                let driver = try QUICClientDriver(
                    context: context, client: clientContext, remote: group.localAddress, serverName: "localhost",
                    receiveSlots: 4
                ) { connection, event in
                    client.download.handle(connection, event)
                    guard client.portBefore == nil, client.download.received >= size / 4, let driver = client.driver else { return }
                    client.portBefore = driver.socket.localAddress.port
                    // Not from inside the event handler: the running pass holds the old socket.
                    context.afterCurrentEvent { context in
                        do { try client.driver?.migrate(context) } catch { finish(.failure(error)) }
                    }
                }
                client.driver = driver
                client.download.onFinished = { [unowned driver] intact in
                    outcomes.append(Outcome(intact: intact, portBefore: client.portBefore, portAfter: driver.socket.localAddress.port))
                    if outcomes.count == clients { finish(.success(outcomes)) }
                }
            }
        }
        #expect(outcomes.count == clients)
        #expect(outcomes.allSatisfy { $0.intact && $0.portBefore != nil && $0.portBefore != $0.portAfter })
        // Where each loop's connections come from now, and what its endpoint answered itself.
        var serverPorts: [Set<UInt16>] = []
        for driver in group.drivers {
            let (ports, resets) = try await driver.loop.submit { _ in
                (Set(driver.value.connections.map(\.path.remote.port)), driver.value.endpoint.statelessResetsSent)
            }
            #expect(resets == 0, "a packet reached a loop that does not know its connection")
            serverPorts.append(ports)
        }
        #expect(serverPorts.allSatisfy { !$0.isEmpty }, "the kernel hash put every client on one loop")
        #expect(serverPorts.reduce(Set()) { $0.union($1) } == Set(outcomes.map(\.portAfter)))
        await group.close()
    }
}
