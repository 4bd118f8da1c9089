// Braid benchmarks. Today: the sans-IO QUIC engine alone (client and server endpoint in one
// process, packets handed over in memory, no sockets), which bounds what the datapath can
// reach. The socket, batching, baseline and emulated-RTT scenarios come with the datapath and
// benchmark issues; they are listed below as not yet implemented rather than faked.
#if canImport(Glibc)
import Glibc
#endif
import BraidIO
import BraidPerf
import BraidQUIC
import Foundation

let fixtures = "Tests/BraidTests/Fixtures"
let quick = CommandLine.arguments.contains("--quick")

func cpuNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let micros = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
    return UInt64(micros) * 1000
}

/// A client and a server endpoint wired back to back in memory.
final class Pair {
    let server: QUICServerEndpoint
    let client: QUICConnection
    var serverConnection: QUICConnection?

    init(context: QUICClientContext, server: QUICServerEndpoint) throws {
        self.server = server
        let path = QUICPath(local: QUICAddress(ip: "127.0.0.2", port: 5000)!, remote: QUICAddress(ip: "127.0.0.1", port: 4433)!)
        client = try context.connect(path: path, serverName: "localhost", now: monotonicNow())
    }

    /// Moves every pending packet both ways and fires due timers.
    func pump() {
        let now = monotonicNow()
        client.writeTransmits(now: now) { path, ecn, segmentSize, batch in
            let arrival = QUICPath(local: path.remote, remote: path.local)
            Transmit.forEachDatagram(in: batch, segmentSize: segmentSize) {
                if let connection = server.receive(datagram: $0, path: arrival, ecn: ecn, now: now) {
                    serverConnection = connection
                }
            }
        }
        serverConnection?.writeTransmits(now: now) { path, ecn, segmentSize, batch in
            let arrival = QUICPath(local: path.remote, remote: path.local)
            Transmit.forEachDatagram(in: batch, segmentSize: segmentSize) {
                client.receive(datagram: $0, path: arrival, ecn: ecn, now: now)
            }
        }
        for connection in [client, serverConnection].compactMap({ $0 }) {
            if let deadline = connection.nextDeadline, deadline <= now { connection.handleTimeout(now: now) }
        }
    }
}

/// `datapath.bulk`: a perf download over loopback UDP, server and client on their own event
/// loops (one process), with all batching on and all off; syscalls as the sockets counted them.
func datapathBulk(megabytes: Int) async throws {
    print("datapath.bulk: \(megabytes) MB perf download over loopback UDP, server and client loops in one process")
    // `--batching=on` / `--batching=off` runs one configuration (e.g. under `perf stat`).
    let chosen = CommandLine.arguments.first { $0.hasPrefix("--batching=") }.map { $0.dropFirst("--batching=".count) }
    let configurations: [BatchingOptions] = chosen == "on" ? [.all] : chosen == "off" ? [.none] : [.all, .none]
    for batching in configurations {
        let serverLoop = try EventLoop(name: "bench-server")
        let clientLoop = try EventLoop(name: "bench-client")
        defer {
            serverLoop.shutdown()
            clientLoop.shutdown()
        }
        let (address, server) = try await serverLoop.submit { context in
            var configuration = QUICServerConfiguration(
                alpn: ["perf"], certificateChainFile: "\(fixtures)/server.pem", privateKeyFile: "\(fixtures)/server-key.pem")
            configuration.transport.idleTimeout = .seconds(60)
            let perf = PerfServer()
            let driver = try QUICServerDriver(
                context: context, endpoint: QUICServerEndpoint(configuration: configuration),
                bindTo: QUICAddress(ip: "127.0.0.1", port: 0)!, batching: batching, onEvent: perf.handle)
            return (driver.localAddress, LoopBound(driver, on: context.loop))
        }
        let size = megabytes * 1024 * 1024
        let cpuStart = cpuNanoseconds()
        let start = monotonicNow()
        let (intact, client) = try await clientLoop.run(timeout: .seconds(600)) { context, finish in
            var configuration = QUICClientConfiguration(alpn: ["perf"])
            configuration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile("\(fixtures)/ca.pem"))
            let download = PerfDownload(size: size)
            let driver = try QUICClientDriver(
                context: context, client: QUICClientContext(configuration: configuration), remote: address,
                serverName: "localhost", batching: batching, onEvent: download.handle)
            download.onFinished = { intact in
                finish(.success((intact, driver.socket.counters)))
                driver.connection.close(now: context.now)
                driver.service(context)
            }
        }
        let seconds = Double(monotonicNow().nanoseconds - start.nanoseconds) / 1e9
        let cpu = Double(cpuNanoseconds() - cpuStart)
        let serverSide = try await serverLoop.submit { _ in server.value.socket.counters }
        guard intact else { throw DatapathError.system("perf download arrived altered", 0) }
        print("  \(batching): goodput=\(String(format: "%.2f", Double(size) * 8 / seconds / 1e9)) Gbit/s"
              + " cpu=\(String(format: "%.2f", cpu / Double(size))) ns/byte (both ends)")
        for (side, counters) in [("server", serverSide), ("client", client)] {
            print("    \(side): sendmsg=\(counters.sendmsgCalls) sendmmsg=\(counters.sendmmsgCalls)"
                  + " recvmsg=\(counters.recvmsgCalls) recvmmsg=\(counters.recvmmsgCalls) total=\(counters.syscalls)"
                  + " per-MB=\(String(format: "%.1f", Double(counters.syscalls) / Double(megabytes)))"
                  + " datagrams out/in=\(counters.datagramsSent)/\(counters.datagramsReceived)"
                  + " gso=\(counters.gsoSegments)/\(counters.gsoBatches) gro=\(counters.groSegments)/\(counters.groMessages)")
        }
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

do {
    var serverConfiguration = QUICServerConfiguration(
        alpn: ["perf"], certificateChainFile: "\(fixtures)/server.pem", privateKeyFile: "\(fixtures)/server-key.pem")
    serverConfiguration.transport.idleTimeout = .seconds(60)
    var clientConfiguration = QUICClientConfiguration(alpn: ["perf"])
    clientConfiguration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile("\(fixtures)/ca.pem"))
    let context = try QUICClientContext(configuration: clientConfiguration)
    let server = try QUICServerEndpoint(configuration: serverConfiguration)

    print("Braid benchmarks (\(quick ? "quick" : "full") mode)")
    print("engine.handshake: in-memory 1-RTT handshake, wall time from connect to both ends established")
    var handshakeMillis: [Double] = []
    let handshakes = quick ? 50 : 300
    for _ in 0..<handshakes {
        let start = monotonicNow()
        let pair = try Pair(context: context, server: server)
        while !(pair.client.isEstablished && pair.serverConnection?.isEstablished == true) { pair.pump() }
        handshakeMillis.append(Double((monotonicNow().nanoseconds - start.nanoseconds)) / 1e6)
        pair.client.close(now: monotonicNow())
        pair.pump()
    }
    print(String(format: "  handshakes=%d p50=%.3f ms p90=%.3f ms p99=%.3f ms", handshakes,
                 percentile(handshakeMillis, 0.5), percentile(handshakeMillis, 0.9), percentile(handshakeMillis, 0.99)))

    let megabytes = quick ? 64 : 512
    print("engine.bulk: \(megabytes) MB on one stream, in memory (no sockets), both ends in one process")
    let pair = try Pair(context: context, server: server)
    while !pair.client.isEstablished { pair.pump() }
    let stream = try pair.client.openStream(bidirectional: true)
    let chunk = [UInt8](repeating: 0xab, count: 64 * 1024)
    let total = megabytes * 1024 * 1024
    var queued = 0
    var received = 0
    let cpuStart = cpuNanoseconds()
    let start = monotonicNow()
    while received < total {
        while queued < total, pair.client.canSend(streamID: stream) {
            try pair.client.send(streamID: stream, bytes: chunk, fin: queued + chunk.count >= total)
            queued += chunk.count
        }
        pair.pump()
        if let serverSide = pair.serverConnection {
            while let event = serverSide.pollEvent() { _ = event }
            received += (try? serverSide.read(streamID: stream))?.bytes.count ?? 0
        }
        while pair.client.pollEvent() != nil {}
    }
    let seconds = Double(monotonicNow().nanoseconds - start.nanoseconds) / 1e9
    let cpu = Double(cpuNanoseconds() - cpuStart)
    let goodput = Double(total) * 8 / seconds / 1e9
    let perByte = cpu / Double(total)
    let statistics = pair.client.statistics
    print(String(format: "  goodput=%.2f Gbit/s cpu=%.2f ns/byte (both ends)", goodput, perByte)
          + " packets=\(statistics.packetsSent) batches=\(statistics.transmits)")

    try await datapathBulk(megabytes: quick ? 64 : 200)

    print("not yet implemented (see the open benchmark issue): connection establishment over sockets,")
    print("  CPU against raw BSD sockets, throughput across configurations, separate processes")
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
