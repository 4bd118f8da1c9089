import BraidIO
import BraidQUIC
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The sans-IO engine alone: client and server endpoint in one process, packets handed over in
/// memory, no sockets. It bounds what the datapath can reach.
enum EngineScenarios {
    static let scenario = "engine"

    static func run(_ bench: Bench) async throws {
        var serverConfiguration = QUICServerConfiguration(alpn: ["perf"], certificateChainFile: Bench.certificate, privateKeyFile: Bench.key)
        serverConfiguration.transport.idleTimeout = .seconds(60)
        var clientConfiguration = QUICClientConfiguration(alpn: ["perf"])
        clientConfiguration.verification = QUICCertificateVerification(trustRoots: .certificateAuthorityFile(Bench.ca))
        let context = try QUICClientContext(configuration: clientConfiguration)
        let server = try QUICServerEndpoint(configuration: serverConfiguration)

        var handshakes: [UInt64] = []
        bench.row("in-memory 1-rtt handshake")
        for _ in 0..<(bench.quick ? 50 : 300) {
            let start = monotonicNow()
            let pair = try Pair(context: context, server: server)
            while !(pair.client.isEstablished && pair.serverConnection?.isEstablished == true) { pair.pump() }
            handshakes.append(monotonicNow().nanoseconds - start.nanoseconds)
            pair.client.close(now: monotonicNow())
            pair.pump()
        }
        bench.results.recordLatencies(scenario, "in-memory 1-rtt handshake", "both ends established", nanoseconds: handshakes)

        let megabytes = bench.quick ? 64 : 512
        bench.row("in-memory bulk, 1 stream, \(megabytes) MB")
        let pair = try Pair(context: context, server: server)
        while !pair.client.isEstablished { pair.pump() }
        let stream = try pair.client.openStream(bidirectional: true)
        let chunk = [UInt8](repeating: 0xab, count: 64 * 1024)
        let total = megabytes * 1024 * 1024
        var queued = 0, received = 0
        let cpuStart = processCPUNanoseconds()
        let start = monotonicNow()
        while received < total {
            while queued < total, pair.client.canSend(streamID: stream) {
                try pair.client.send(streamID: stream, bytes: chunk, fin: queued + chunk.count >= total)
                queued += chunk.count
            }
            pair.pump()
            if let serverSide = pair.serverConnection {
                while serverSide.pollEvent() != nil {}
                received += (try? serverSide.read(streamID: stream))?.bytes.count ?? 0
            }
            while pair.client.pollEvent() != nil {}
        }
        let seconds = Double(monotonicNow().nanoseconds - start.nanoseconds) / 1e9
        let config = "in-memory bulk, 1 stream, \(megabytes) MB"
        bench.results.record(scenario, config, "goodput", Double(total) * 8 / seconds / 1e9, "Gbit/s")
        bench.results.record(scenario, config, "cpu per byte, total", Double(processCPUNanoseconds() - cpuStart) / Double(total), "ns/B")
    }
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
        if let serverConnection { server.applyRoutingChanges(of: serverConnection) }
    }
}

