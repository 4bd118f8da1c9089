import BraidPerf
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A perf or echo transfer between a QUIC server role and a QUIC client role, with the numbers
/// every transfer scenario reads off it.
struct QUICTransfer {
    var goodputGbits: Double
    /// Payload bytes the transfer moved (both directions for echo).
    var payloadBytes: Double
    var clientCPU: Double
    var serverCPU: Double
    /// Context switches of each process (every thread), from its resource usage.
    var clientSwitches: Int
    var serverSwitches: Int
    /// Socket system calls by side, as the library counted them.
    var clientSyscalls: Int
    var serverSyscalls: Int
    /// The same from `perf stat` tracepoints, when available.
    var perfClientSyscalls: Int?
    var perfServerSyscalls: Int?

    /// `config` flags go to both roles (cc, payload, batching-off); `client` flags to the client.
    static func run(_ bench: Bench, config: [String: String], client: [String: String], perfStat: Bool = false) async throws -> QUICTransfer {
        var serverFlags = config
        serverFlags["cert"] = Bench.certificate
        serverFlags["key"] = Bench.key
        serverFlags["connections"] = "1"
        serverFlags["port"] = "0"
        var clientFlags = config.merging(client) { $1 }
        clientFlags["ca"] = Bench.ca
        let run = try await bench.pair(
            server: "quic-server", client: "quic-client", serverFlags: serverFlags, clientFlags: clientFlags, perfStat: perfStat)
        let seconds = run.client["seconds"] as? Double ?? 0
        let sent = run.client["bytes_sent"] as? Int ?? 0, received = run.client["bytes_received"] as? Int ?? 0
        let statistics = run.client["statistics"] as? [String: Any]
        let clientCalls = (statistics?["syscalls"] as? [String: Int] ?? [:]).values.reduce(0, +)
        let serverCalls = ["sendmsg", "sendmmsg", "recvmsg", "recvmmsg"].reduce(0) { $0 + (run.server[$1] as? Int ?? 0) }
        let quicCalls = ["sendmsg", "sendmmsg", "recvmsg", "recvmmsg"]
        return QUICTransfer(
            goodputGbits: seconds > 0 ? Double(sent + received) * 8 / seconds / 1e9 : 0,
            payloadBytes: Double(sent + received), clientCPU: run.clientExit.cpuSeconds, serverCPU: run.serverExit.cpuSeconds,
            clientSwitches: run.clientExit.contextSwitches, serverSwitches: run.serverExit.contextSwitches,
            clientSyscalls: clientCalls, serverSyscalls: serverCalls,
            perfClientSyscalls: run.perf.map { perf in quicCalls.reduce(0) { $0 + (perf.client[$1] ?? 0) } },
            perfServerSyscalls: run.perf.map { perf in quicCalls.reduce(0) { $0 + (perf.server[$1] ?? 0) } })
    }

    var cpuNanosecondsPerByte: (client: Double, server: Double, total: Double) {
        (clientCPU * 1e9 / payloadBytes, serverCPU * 1e9 / payloadBytes, (clientCPU + serverCPU) * 1e9 / payloadBytes)
    }

    var contextSwitchesPerMegabyte: (client: Double, server: Double) {
        (Double(clientSwitches) * 1e6 / payloadBytes, Double(serverSwitches) * 1e6 / payloadBytes)
    }
}

/// A bulk transfer where the client sends and the server receives: between the raw baseline
/// roles, or between Braid's TLS and TCP roles over the public API (`braid`), which do what
/// the raw loops do (64 KiB application writes, the server reading to the end and counting,
/// the client timing its sends and the wait for the server's close, not the handshake).
struct RawTransfer {
    var goodputGbits: Double
    /// Payload bytes the client sent and the server received (UDP may drop some; TCP and TLS
    /// deliver all).
    var bytesSent: Double
    var bytesReceived: Double
    var clientCPU: Double
    var serverCPU: Double
    var clientSwitches: Int
    var serverSwitches: Int

    /// `rate`: Mbit/s the raw UDP client paces itself to (0: as fast as it can).
    static func run(_ bench: Bench, kind: String, bytes: Int, payload: Int, braid: Bool = false, rate: Int = 0) async throws -> RawTransfer {
        var serverFlags = ["kind": kind, "port": "0"]
        var clientFlags = ["kind": kind, "bytes": String(bytes), "payload": String(payload)]
        if rate > 0 { clientFlags["rate"] = String(rate) }
        if kind == "tls" {
            serverFlags["cert"] = Bench.certificate
            serverFlags["key"] = Bench.key
            if !braid { clientFlags["sni"] = "localhost" }
        }
        if braid { serverFlags["connections"] = "1" }
        let run = try await bench.pair(
            server: braid ? "stream-server" : "raw-server", client: braid ? "stream-client" : "raw-client",
            serverFlags: serverFlags, clientFlags: clientFlags)
        let received = Double(run.server["bytes"] as? Int ?? 0)
        let seconds = run.client["seconds"] as? Double ?? 0
        guard received > 0 else { throw ApplicationFailure("\(braid ? "braid" : "raw") \(kind): the server received nothing") }
        if braid && Int(received) != bytes { throw ApplicationFailure("braid \(kind): the server received \(Int(received)) of \(bytes) bytes") }
        return RawTransfer(
            goodputGbits: seconds > 0 ? received * 8 / seconds / 1e9 : 0,
            bytesSent: Double(run.client["bytes"] as? Int ?? bytes), bytesReceived: received,
            clientCPU: run.clientExit.cpuSeconds, serverCPU: run.serverExit.cpuSeconds,
            clientSwitches: run.clientExit.contextSwitches, serverSwitches: run.serverExit.contextSwitches)
    }

    /// Each end's CPU per byte it handled (the client's per byte sent, the server's per byte
    /// received), and their sum: the same as per byte received when nothing is dropped.
    var cpuNanosecondsPerByte: (client: Double, server: Double, total: Double) {
        CPUPerByte.split(clientCPU: clientCPU, bytesSent: bytesSent, serverCPU: serverCPU, bytesReceived: bytesReceived)
    }

    var contextSwitchesPerMegabyte: (client: Double, server: Double) {
        (Double(clientSwitches) * 1e6 / bytesSent, Double(serverSwitches) * 1e6 / bytesReceived)
    }
}

extension Results {
    /// Per-byte CPU from repeated runs: the run with the median total gives all three rows;
    /// the totals' spread is recorded as min and max.
    func recordCPU(_ scenario: String, _ config: String, _ runs: [(client: Double, server: Double, total: Double)]) {
        guard !runs.isEmpty else { return }
        let sorted = runs.sorted { $0.total < $1.total }
        let median = sorted[sorted.count / 2]
        record(scenario, config, "cpu per byte, client", median.client, "ns/B")
        record(scenario, config, "cpu per byte, server", median.server, "ns/B")
        record(scenario, config, "cpu per byte, total", median.total, "ns/B")
        if runs.count > 1 {
            record(scenario, config, "cpu per byte, total min", sorted.first!.total, "ns/B")
            record(scenario, config, "cpu per byte, total max", sorted.last!.total, "ns/B")
        }
    }
}

/// Scenario 2: system calls per MB, batching on, each switch off, all off.
enum Syscalls {
    static let scenario = "syscalls"
    static let configurations: [(String, String?)] = [
        ("all batching on", nil), ("gso off", "gso"), ("gro off", "gro"), ("mmsg off", "mmsg"), ("all batching off", "gso,gro,mmsg"),
    ]

    static func run(_ bench: Bench) async throws {
        let perfStat = PerfStat.available
        if !perfStat { bench.results.note("perf stat cannot count syscall tracepoints here: library counters only") }
        let bulkBytes = (bench.quick ? 32 : 200) * 1_000_000
        let datagrams = bench.quick ? 10_000 : 50_000
        for (name, off) in configurations {
            bench.row("quic bulk and datagrams, \(name)")
            var config: [String: String] = [:]
            if let off { config["batching-off"] = off }
            let bulk = try await QUICTransfer.run(bench, config: config, client: ["alpn": "perf", "download": String(bulkBytes)], perfStat: perfStat)
            record(bench, "quic bulk, \(name)", bulk)
            let flood = try await QUICTransfer.run(
                bench, config: config, client: ["alpn": "echo", "streams": "0", "datagrams": String(datagrams), "datagram-size": String(CPUCost.largeDatagram)], perfStat: perfStat)
            record(bench, "quic datagrams (echo), \(name)", flood)
        }
        // Plain UDP over the public API: 1,200-byte datagrams in `batch` blocks of 64, with
        // `UDP()` and with `UDP().batching(.none)`. Client calls per MB it sent, server calls per
        // MB it received (UDP drops what the receiver cannot keep up with).
        for (name, off) in [("braid udp, batching on", false), ("braid udp, batching off", true)] {
            bench.row(name)
            let udp: UDPTransfer
            do { udp = try await UDPTransfer.run(bench, bytes: bulkBytes, payload: 1200, batch: 64, batchingOff: off, perfStat: perfStat) } catch {
                bench.results.note("syscalls, \(name): \(error)")
                continue
            }
            let sent = udp.bytesSent / 1e6, received = udp.bytesReceived / 1e6
            bench.results.record(scenario, name, "client syscalls per MB", Double(udp.clientSyscalls) / sent, "calls/MB")
            bench.results.record(scenario, name, "server syscalls per MB", Double(udp.serverSyscalls) / received, "calls/MB")
            if let client = udp.perfClientSyscalls, let server = udp.perfServerSyscalls {
                bench.results.record(scenario, name, "client syscalls per MB (perf)", Double(client) / sent, "calls/MB")
                bench.results.record(scenario, name, "server syscalls per MB (perf)", Double(server) / received, "calls/MB")
            }
            // The hand-offs between the loop and the application's tasks: a hand-off that
            // finds the other side running costs neither; one that must wake it, a futex call
            // and a switch or two.
            let waits = udp.waitsPerThousandMessages
            bench.results.record(scenario, name, "client switches/1k msgs", waits.clientSwitches, "switches")
            bench.results.record(scenario, name, "server switches/1k msgs", waits.serverSwitches, "switches")
            if let client = waits.clientFutex, let server = waits.serverFutex {
                bench.results.record(scenario, name, "client futex/1k msgs (perf)", client, "calls")
                bench.results.record(scenario, name, "server futex/1k msgs (perf)", server, "calls")
            }
        }
    }

    static func record(_ bench: Bench, _ config: String, _ transfer: QUICTransfer) {
        let megabytes = transfer.payloadBytes / 1e6
        bench.results.record(scenario, config, "client syscalls per MB", Double(transfer.clientSyscalls) / megabytes, "calls/MB")
        bench.results.record(scenario, config, "server syscalls per MB", Double(transfer.serverSyscalls) / megabytes, "calls/MB")
        if let client = transfer.perfClientSyscalls, let server = transfer.perfServerSyscalls {
            bench.results.record(scenario, config, "client syscalls per MB (perf)", Double(client) / megabytes, "calls/MB")
            bench.results.record(scenario, config, "server syscalls per MB (perf)", Double(server) / megabytes, "calls/MB")
        }
    }
}

/// Scenario 3: CPU per byte, Braid against the loops a user would write on raw sockets.
enum CPUCost {
    static let scenario = "cpu"
    /// The "1,200-byte" datagram rows use 1,150 bytes: until path-MTU discovery raises the
    /// packet size, QUIC packets are 1,200 bytes and carry at most 1,154 bytes of datagram.
    static let largeDatagram = 1150
    /// The paced UDP rows: both clients send 1,200-byte datagrams at this many Mbit/s.
    static let pacedMegabits = 1000
    static let pacedRaw = "raw udp, one datagram per call, paced 1 Gbit/s"
    static let pacedBraid = "braid udp, batch, paced 1 Gbit/s"

    static func run(_ bench: Bench) async throws {
        let bytes = (bench.quick ? 200 : 1000) * 1_000_000
        let repetitions = bench.quick ? 1 : 3
        // Unpaced, Braid's UDP sender outruns its receiver, whose socket then drops ("delivered").
        // Paced at a rate both receivers keep up with (a rate in the lists below: those rows
        // move `pacedBytes`), the server rows compare the receive paths alone; the clients'
        // pacing (a sleep every 64 datagrams: nanosleep in the raw loop, `Task.sleep` in
        // Braid's) is in their rows.
        let pacedBytes = (bench.quick ? 100 : 300) * 1_000_000
        let raw = [
            ("udp", 1200, "raw udp, one datagram per call", 0), ("udp-gso", 1200, "raw udp, gso/gro", 0),
            ("tcp", 65536, "raw tcp", 0), ("tls", 65536, "raw tcp+tls1.3 (gnutls)", 0),
            ("udp", 1200, CPUCost.pacedRaw, CPUCost.pacedMegabits),
        ]
        // Braid's TLS and TCP over the public API, doing what the raw TCP and TLS loops do.
        let braidStreams = [("tls", "braid tls"), ("tcp", "braid tcp")]
        // Plain `send` calls, and `batch` blocks of 64 sends, unpaced and paced.
        let braidUDP = [(0, "braid udp", 0), (64, "braid udp, batch", 0), (64, CPUCost.pacedBraid, CPUCost.pacedMegabits)]
        let datagramCount = bytes / CPUCost.largeDatagram / 10
        var samples: [String: [(client: Double, server: Double, total: Double)]] = [:]
        var switches: [String: [(client: Double, server: Double)]] = [:]
        var delivered: [String: [Double]] = [:]
        // Rounds of every row, so a drift in the (shared) machine's speed hits all rows alike.
        for round in 0..<repetitions {
            for (kind, payload, config, rate) in raw {
                bench.row(config, round: round, of: repetitions)
                let transfer = try await RawTransfer.run(bench, kind: kind, bytes: rate > 0 ? pacedBytes : bytes, payload: payload, rate: rate)
                samples[config, default: []].append(transfer.cpuNanosecondsPerByte)
                // Unpaced too for UDP: what raw GSO delivers against its own sender is the
                // reference for what any receiver delivers against a GSO sender on loopback.
                if rate > 0 || kind.hasPrefix("udp") { delivered[config, default: []].append(100 * transfer.bytesReceived / transfer.bytesSent) }
            }
            for (kind, config) in braidStreams {
                bench.row(config, round: round, of: repetitions)
                let transfer = try await RawTransfer.run(bench, kind: kind, bytes: bytes, payload: 65536, braid: true)
                samples[config, default: []].append(transfer.cpuNanosecondsPerByte)
                switches[config, default: []].append(transfer.contextSwitchesPerMegabyte)
            }
            bench.row("braid quic stream, stream echo, datagrams", round: round, of: repetitions)
            let stream = try await QUICTransfer.run(bench, config: [:], client: ["alpn": "perf", "download": String(bytes)])
            samples["braid quic stream", default: []].append(stream.cpuNanosecondsPerByte)
            switches["braid quic stream", default: []].append(stream.contextSwitchesPerMegabyte)
            // The echo server receives and sends up to 64 KiB per call: many stream calls per MB.
            let echo = try await QUICTransfer.run(bench, config: [:], client: ["alpn": "echo", "bytes": String(bytes / 5)])
            samples["braid quic stream echo", default: []].append(echo.cpuNanosecondsPerByte)
            switches["braid quic stream echo", default: []].append(echo.contextSwitchesPerMegabyte)
            let datagrams = try await QUICTransfer.run(
                bench, config: [:],
                client: ["alpn": "echo", "streams": "0", "datagrams": String(datagramCount), "datagram-size": String(CPUCost.largeDatagram)])
            samples["braid quic datagrams", default: []].append(datagrams.cpuNanosecondsPerByte)
            // Braid `UDP()` doing what the raw UDP loops do (1,200-byte datagrams, client to
            // server, the same bytes; each end's CPU per byte it sent or received).
            // A failed UDP run (seen once: the server received nothing) is noted, not fatal.
            for (batch, config, rate) in braidUDP {
                bench.row(config, round: round, of: repetitions)
                let udp: UDPTransfer
                do { udp = try await UDPTransfer.run(bench, bytes: rate > 0 ? pacedBytes : bytes, payload: 1200, batch: batch, rate: rate) } catch {
                    bench.results.note("cpu, \(config): \(error)")
                    continue
                }
                samples[config, default: []].append(udp.cpuNanosecondsPerByte)
                delivered[config, default: []].append(100 * udp.bytesReceived / udp.bytesSent)
            }
        }
        for config in raw.map(\.2) + braidUDP.map(\.1) + braidStreams.map(\.1) + ["braid quic stream", "braid quic stream echo", "braid quic datagrams"] {
            bench.results.recordCPU(scenario, config, samples[config] ?? [])
        }
        // UDP drops what the receiver cannot keep up with: the share of the bytes sent that
        // the server received.
        for (config, values) in delivered.sorted(by: { $0.key < $1.key }) {
            bench.results.recordRepeated(scenario, config, "delivered", values, "%")
        }
        // Each stream call that must wait for the loop costs two context switches; calls that
        // find bytes (or room) waiting cost none.
        for (config, values) in switches.sorted(by: { $0.key < $1.key }) {
            bench.results.recordRepeated(scenario, config, "client switches per MB", values.map(\.client), "switches/MB")
            bench.results.recordRepeated(scenario, config, "server switches per MB", values.map(\.server), "switches/MB")
        }
    }
}

/// Scenario 4: goodput and CPU across configurations, with the raw TCP/TLS baseline and
/// ngtcp2's own example pair as references.
enum Throughput {
    static let scenario = "throughput"

    static func run(_ bench: Bench) async throws {
        let bytes = (bench.quick ? 64 : 500) * 1_000_000
        let repetitions = bench.quick ? 1 : 3
        var configurations: [(String, [String: String], [String: String])] = []
        for streams in [1, 8, 64] {
            configurations.append(("quic \(streams) stream\(streams == 1 ? "" : "s")", [:], ["alpn": "perf", "streams": String(streams), "download": String(bytes / streams)]))
        }
        for size in [100, CPUCost.largeDatagram] {
            let count = min(bytes / size, bench.quick ? 20_000 : 100_000)
            configurations.append(("quic datagrams \(size) B (echo)", [:], ["alpn": "echo", "streams": "0", "datagrams": String(count), "datagram-size": String(size)]))
        }
        configurations.append(("quic 1 stream, batching off", ["batching-off": "gso,gro,mmsg"], ["alpn": "perf", "download": String(bytes)]))
        for cc in ["reno", "bbr"] {
            configurations.append(("quic 1 stream, \(cc)", ["cc": cc], ["alpn": "perf", "download": String(bytes)]))
        }
        configurations.append(("quic 1 stream, udp payload 1200", ["payload": "1200"], ["alpn": "perf", "download": String(bytes)]))
        // Jumbo frames (a 9,000-byte datacenter MTU less IPv6 and UDP headers): loopback
        // carries them.
        configurations.append(("quic 1 stream, udp payload 8952 (jumbo)", ["payload": "8952"], ["alpn": "perf", "download": String(bytes)]))
        // Every configuration once per round, rounds repeated: a drift in the machine's speed
        // (it is shared) then spreads over all rows instead of landing on a few.
        let ngtcp2Pair = try NgtcpExamplePair.programs == nil ? nil : NgtcpExamplePair.prepare(bytes: bytes, certificate: Bench.certificate, key: Bench.key)
        defer { ngtcp2Pair?.cleanup() }
        if ngtcp2Pair == nil {
            bench.results.note("ngtcp2's example programs are not installed (ngtcp2-server, ngtcp2-client): no reference row")
        }
        let braidTool = HTTP3Download.braidTool
        if braidTool == nil {
            bench.results.note("the braid tool is not built beside this program (swift build -c release --product braid): no braid http/3 row")
        }
        var quicGo: String?
        switch try await QuicGoPerfPair.prepare() {
        case .success(let binary): quicGo = binary
        case .failure(let why): bench.results.note("\(why): no quic-go row")
        }
        var goodputs: [String: [Double]] = [:], cpus: [String: [Double]] = [:]
        let raw = [("tcp", "raw tcp"), ("tls", "raw tcp+tls1.3 (gnutls)")]
        let braidStreams = [("tls", "braid tls"), ("tcp", "braid tcp")]
        let ngtcp2Name = "ngtcp2 examples (gnutls), 1 stream"
        let quicGoName = "quic-go 0.29 perf pair, 1 stream"
        let braidHTTP3Name = "braid http/3 download"
        var http3CPU: [String: [(client: Double, server: Double, total: Double)]] = [:]
        let requestsName = "braid http/3 requests"
        var requestRates: [Double] = [], requestCPU: [HTTP3Requests] = []
        let framers = FramerRows.Samples()
        for round in 0..<repetitions {
            for (name, config, client) in configurations {
                bench.row(name, round: round, of: repetitions)
                let transfer = try await QUICTransfer.run(bench, config: config, client: client)
                goodputs[name, default: []].append(transfer.goodputGbits)
                cpus[name, default: []].append(transfer.cpuNanosecondsPerByte.total)
            }
            for (kind, name) in raw {
                bench.row(name, round: round, of: repetitions)
                goodputs[name, default: []].append(try await RawTransfer.run(bench, kind: kind, bytes: bytes, payload: 65536).goodputGbits)
            }
            for (kind, name) in braidStreams {
                bench.row(name, round: round, of: repetitions)
                goodputs[name, default: []].append(try await RawTransfer.run(bench, kind: kind, bytes: bytes, payload: 65536, braid: true).goodputGbits)
            }
            // HTTP/3 on both sides: ngtcp2's example pair (a file of `bytes`) and Braid's
            // server and client (`/bytes`), timed alike.
            if let ngtcp2Pair {
                bench.row(ngtcp2Name, round: round, of: repetitions)
                let download = try await HTTP3Download.ngtcp2(ngtcp2Pair, bytes: bytes)
                goodputs[ngtcp2Name, default: []].append(download.goodputGbits)
                http3CPU[ngtcp2Name, default: []].append(download.cpuNanosecondsPerByte)
            }
            if let braidTool {
                bench.row("\(braidHTTP3Name), \(requestsName)", round: round, of: repetitions)
                let download = try await HTTP3Download.braid(braidTool, bytes: bytes)
                goodputs[braidHTTP3Name, default: []].append(download.goodputGbits)
                http3CPU[braidHTTP3Name, default: []].append(download.cpuNanosecondsPerByte)
                let small = try await HTTP3Requests.run(braidTool, requests: bench.quick ? 10_000 : 50_000)
                requestRates.append(small.requestsPerSecond)
                requestCPU.append(small)
            }
            if let quicGo {
                bench.row(quicGoName, round: round, of: repetitions)
                goodputs[quicGoName, default: []].append(try await QuicGoPerfPair.goodput(quicGo, bytes: bytes))
            }
            try await FramerRows.round(bench, framers)
        }
        for (name, _, _) in configurations {
            bench.results.recordRepeated(scenario, name, "goodput", goodputs[name] ?? [], "Gbit/s")
            bench.results.recordRepeated(scenario, name, "cpu per byte, total", cpus[name] ?? [], "ns/B")
        }
        for name in raw.map(\.1) + braidStreams.map(\.1) + [ngtcp2Name, braidHTTP3Name, quicGoName] {
            bench.results.recordRepeated(scenario, name, "goodput", goodputs[name] ?? [], "Gbit/s")
        }
        for name in [ngtcp2Name, braidHTTP3Name] { bench.results.recordCPU(scenario, name, http3CPU[name] ?? []) }
        // 1 KiB responses, 100 requests in flight on one connection; the CPU rows are the run
        // with the median total.
        if !requestCPU.isEmpty {
            bench.results.recordRepeated(scenario, requestsName, "requests per second", requestRates, "requests/s")
            let median = requestCPU.sorted { $0.totalMicroseconds < $1.totalMicroseconds }[requestCPU.count / 2]
            bench.results.record(scenario, requestsName, "cpu per request, client", median.clientMicroseconds, "us")
            bench.results.record(scenario, requestsName, "cpu per request, server", median.serverMicroseconds, "us")
            bench.results.record(scenario, requestsName, "cpu per request, total", median.totalMicroseconds, "us")
        }
        FramerRows.record(bench, framers, scenario: scenario)
    }
}
