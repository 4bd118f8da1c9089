import Braid
import BraidIO
import BraidPerf
import BraidQUIC
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The child-process side of the suite: `benchmarks role <name> --flag value ...`. Servers
/// print `listening <port>` first; every role prints one JSON object on its last line.
enum Roles {
    static func run(_ arguments: [String]) async -> Int32 {
        guard let role = arguments.first else {
            FileHandle.standardError.write(Data("usage: benchmarks role <name> [--flag value ...]\n".utf8))
            return 64
        }
        let flags = Flags(Array(arguments.dropFirst()))
        do {
            switch role {
            case "quic-server": try await quicServer(flags)
            case "quic-client": try await quicClient(flags)
            case "quic-handshakes": try await quicHandshakes(flags)
            case "quic-idle-connections": try await quicIdleConnections(flags)
            case "stream-server": try await streamServer(flags)
            case "stream-client": try await streamClient(flags)
            case "stream-handshakes": try await streamHandshakes(flags)
            case "stream-idle-connections": try await streamIdleConnections(flags)
            case "framed-server": try await framedServer(flags)
            case "framed-client": try await framedClient(flags)
            case "coder-framing": try coderFraming(flags)
            case "udp-server": try await udpServer(flags)
            case "udp-client": try await udpClient(flags)
            case "http3-client": try await http3Client(flags)
            case "app-server": try await appServer(flags)
            case "app-client": try await appClient(flags)
            default:
                guard try RawBaselines.run(role, Array(arguments.dropFirst())) else {
                    FileHandle.standardError.write(Data("unknown role \(role)\n".utf8))
                    return 64
                }
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("role \(role) failed: \(error)\n".utf8))
            return 1
        }
    }

    /// `--name value` pairs.
    struct Flags: Sendable {
        private var values: [String: String] = [:]
        init(_ arguments: [String]) {
            var index = 0
            while index + 1 < arguments.count {
                values[String(arguments[index].drop { $0 == "-" })] = arguments[index + 1]
                index += 2
            }
        }
        subscript(_ name: String) -> String? { values[name] }
        func setting(_ name: String, _ value: String) -> Flags {
            var copy = self
            copy.values[name] = value
            return copy
        }
        func int(_ name: String, _ fallback: Int) -> Int { values[name].flatMap { Int($0) } ?? fallback }
    }

    /// Where servers listen and clients connect: 127.0.0.1, or $BRAID_BENCH_HOST when the
    /// harness runs the ends in network namespaces behind an emulated delay. Read once: the
    /// handshake roles connect thousands of times, and building the environment dictionary
    /// each time cost 3% of the QUIC handshake client's CPU.
    static let benchHost: String = ProcessInfo.processInfo.environment["BRAID_BENCH_HOST"] ?? "127.0.0.1"

    /// The stack both QUIC roles use, from the scenario's configuration flags.
    static func stack(_ flags: Flags) -> QUIC {
        let off = Set((flags["batching-off"] ?? "").split(separator: ",").map(String.init))
        let batching = BatchingOptions(
            segmentationOffload: !off.contains("gso"), receiveOffload: !off.contains("gro"), multiMessage: !off.contains("mmsg"))
        // Servers offer both applications; a client offers the one it runs (echo by default).
        return QUIC(alpn: flags["alpn"].map { [$0] } ?? ["perf", "echo"])
            .maxDatagramFrameSize(65535)
            .idleTimeout(60_000)
            .initialMaxBidirectionalStreams(200)
            .congestionControl(CongestionControl(rawValue: flags["cc"] ?? "cubic") ?? .cubic)
            .maxUDPPayloadSize(flags.int("payload", 1452))
            .batching(batching)
    }

    /// Serves perf and echo until it has served `--connections` connections (or SIGTERM), then
    /// prints the sockets' counters.
    static func quicServer(_ flags: Flags) async throws {
        let quic = stack(flags)
            .identity(certificateChainFile: flags["cert"] ?? "", privateKeyFile: flags["key"] ?? "")
            .earlyDataEnabled(true)
            .serverLoops(flags.int("loops", 1))
        let listener = NetworkListener(for: .hostPort(host: NWEndpoint.Host(benchHost), port: .any)) { quic }
        let expected = flags.int("connections", Int.max)
        let served = Atomic(0)
        let done = AsyncStream<Void>.makeStream()
        let serving = Task {
            try await listener.run { connection in
                _ = await ApplicationServer.serve(connection)
                if served.add(1, ordering: .relaxed).newValue >= expected { done.continuation.finish() }
            }
        }
        for await state in listener.states where state == .ready {
            FileHandle.standardOutput.write(Data("listening \(listener.port!)\n".utf8))
            break
        }
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM)
        signal(SIGTERM, SIG_IGN)
        terminate.setEventHandler { done.continuation.finish() }
        terminate.resume()
        let exitNow = heapProfileExit()
        for await _ in done.stream {}
        let sockets = await listener.socketStatistics ?? SocketStatistics()
        serving.cancel()
        _ = try? await serving.value
        withExtendedLifetime(exitNow) {}
        printJSON([
            "connections": served.load(ordering: .relaxed), "sendmsg": sockets.sendmsgCalls, "sendmmsg": sockets.sendmmsgCalls,
            "recvmsg": sockets.recvmsgCalls, "recvmmsg": sockets.recvmmsgCalls, "bytes_received": sockets.bytesReceived,
            "bytes_sent": sockets.bytesSent,
        ])
    }

    static func connection(_ flags: Flags, cache: QUIC.SessionCache? = nil) -> NetworkConnection<QUIC> {
        var quic = stack(flags.setting("alpn", flags["alpn"] ?? "echo")).trust(.certificateAuthorities(file: flags["ca"] ?? "")).serverName("localhost")
        if let cache { quic = quic.sessionCache(cache) }
        let port = NWEndpoint.Port(integerLiteral: UInt16(flags.int("port", 0)))
        return NetworkConnection(to: .hostPort(host: NWEndpoint.Host(benchHost), port: port)) { quic }
    }

    /// One perf or echo run (`ApplicationClient`), printing its report.
    static func quicClient(_ flags: Flags) async throws {
        var options = ApplicationClient.Options(alpn: flags["alpn"] ?? "perf")
        options.streams = flags.int("streams", 1)
        options.download = flags.int("download", 0)
        options.upload = flags.int("upload", 0)
        options.bytes = flags.int("bytes", 0)
        options.datagrams = flags.int("datagrams", 0)
        options.datagramSize = flags.int("datagram-size", 1000)
        let connection = connection(flags)
        let report = try await ApplicationClient(options: options, connection: connection).perform()
        await connection.close()
        guard report.ok else { throw ApplicationFailure(report.failures.joined(separator: "; ")) }
        printJSON(report.json)
    }

    /// Sequential connections: time to ready, and to the first byte of a 1-byte echo (the
    /// request in 0-RTT with `--resume 1`, after one connection that fetches a ticket).
    static func quicHandshakes(_ flags: Flags) async throws {
        let count = flags.int("count", 50)
        let resume = flags["resume"] == "1"
        let cache = resume ? QUIC.SessionCache() : nil
        if resume {
            let first = connection(flags, cache: cache)
            try await echoOneByte(first, idempotent: false)
            try await waitForTicket(cache!)
            await first.close()
        }
        var ready: [UInt64] = []
        var firstByte: [UInt64] = []
        var earlyData = 0
        let cpuStart = processCPUNanoseconds()
        for _ in 0..<count {
            let start = ContinuousClock.now
            let connection = connection(flags, cache: cache)
            let readyAt = readyInstant(of: connection)
            try await echoOneByte(connection, idempotent: resume)
            let replied = ContinuousClock.now
            guard let readyTime = await readyAt.value else { throw ApplicationFailure("connection ended: \(connection.state)") }
            ready.append((readyTime - start).nanoseconds)
            firstByte.append((replied - start).nanoseconds)
            if connection.earlyDataAccepted { earlyData += 1 }
            // The next connection resumes with the ticket this one receives after its handshake.
            if let cache { try await waitForTicket(cache) }
            await connection.close()
        }
        printJSON(["ready_ns": ready, "first_byte_ns": firstByte, "early_data": earlyData, "cpu_ns": processCPUNanoseconds() - cpuStart])
    }

    /// Waits (up to 2 s) until the server's ticket for the next connection has arrived.
    private static func waitForTicket(_ cache: QUIC.SessionCache) async throws {
        for _ in 0..<2000 where cache.count == 0 { try await Task.sleep(for: .milliseconds(1)) }
    }

    private static func echoOneByte(_ connection: NetworkConnection<QUIC>, idempotent: Bool) async throws {
        let stream = try await connection.openStream()
        if idempotent {
            try await stream.sendIdempotent(Data([7]), endOfStream: true)
        } else {
            try await stream.send(Data([7]), endOfStream: true)
        }
        _ = try await stream.receive(exactly: 1)
    }

    /// Opens `--count` connections, `--concurrency` at a time (the rate), keeps them idle,
    /// reports this process's resident memory before and after, then closes them.
    static func quicIdleConnections(_ flags: Flags) async throws {
        try await holdIdle(flags) { Roles.connection(flags) }
    }
}

/// With `BRAID_HEAP_PROFILE_EXIT` set, SIGUSR1 ends the process at once with everything it
/// holds still allocated, so a heap profiler (heaptrack) reports the held heap as leaked: the
/// heap at that moment, by allocation site.
func heapProfileExit() -> DispatchSourceSignal? {
    guard ProcessInfo.processInfo.environment["BRAID_HEAP_PROFILE_EXIT"] != nil else { return nil }
    let source = DispatchSource.makeSignalSource(signal: SIGUSR1)
    signal(SIGUSR1, SIG_IGN)
    source.setEventHandler { exit(0) }
    source.resume()
    return source
}

/// Resident memory of a process from /proc (this one by default), in bytes.
func residentBytes(of pid: pid_t? = nil) -> Int {
    let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
    guard let status = try? String(contentsOfFile: path, encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return 0 }
    return kilobytes * 1024
}
