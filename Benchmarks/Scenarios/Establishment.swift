import BraidPerf
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Scenario 1: how fast a connection is ready, against TCP and TCP + TLS 1.3 on raw sockets.
enum Establishment {
    static let scenario = "establishment"
    /// The emulated round trip for the RTT runs (10 ms each way through the relay).
    static let emulatedRTT = 20.0

    static func run(_ bench: Bench) async throws {
        let count = bench.quick ? 50 : 300
        try await quic(bench, count: count, emulated: false)
        try await raw(bench, kind: "tcp", count: count)
        try await raw(bench, kind: "tls", count: count)
        try await braidTLS(bench, count: count)
        try await quic(bench, count: bench.quick ? 15 : 60, emulated: true)
        try await delayedPath(bench, count: bench.quick ? 15 : 60)
        try await connectionsAndMemory(bench, count: bench.quick ? 200 : 1000)
        try await tlsConnectionsAndMemory(bench, count: 1000)
    }

    /// Braid TLS over the public API, beside the raw TLS rows: sequential connections, each
    /// timed until `ready` and until a 1-byte echo returns (TCP_NODELAY and no tickets on both
    /// ends, as the raw pair).
    static func braidTLS(_ bench: Bench, count: Int) async throws {
        bench.row("braid tls loopback")
        let server = try bench.role(
            "stream-server", ["kind": "tls", "mode": "echo", "nodelay": "1", "cert": Bench.certificate, "key": Bench.key])
        let port = try await server.listeningPort()
        let (report, _) = try await bench.runClient("stream-handshakes", port: port, ["kind": "tls", "count": String(count)])
        let config = "braid tls loopback"
        bench.results.recordLatencies(scenario, config, "ready", nanoseconds: samples(report["ready_ns"]))
        bench.results.recordLatencies(scenario, config, "first byte", nanoseconds: samples(report["first_byte_ns"]))
        _ = try? await server.stop()
    }

    /// Braid TLS: new connections per second to one listener (16 at a time, each until
    /// `ready`) and memory per idle connection on each side, as for QUIC; beside it the raw
    /// GnuTLS rate (16 client threads, 16 server threads, each connection closed once ready).
    static func tlsConnectionsAndMemory(_ bench: Bench, count: Int) async throws {
        bench.row("braid tls: connections per second, memory per connection")
        let server = try bench.role("stream-server", ["kind": "tls", "mode": "idle", "cert": Bench.certificate, "key": Bench.key])
        let port = try await server.listeningPort()
        try await Task.sleep(for: .milliseconds(200))
        let serverBefore = residentBytes(of: server.pid)
        let client = try bench.role(
            "stream-idle-connections", ["kind": "tls", "port": String(port), "ca": Bench.ca, "count": String(count), "concurrency": "16", "hold": "1"])
        let deadline = ContinuousClock.now + .seconds(120)
        while !client.output.contains("holding") {
            guard client.isRunning, ContinuousClock.now < deadline else {
                throw ApplicationFailure("stream-idle-connections did not open its connections: \(client.errors.suffix(500))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let serverAfter = residentBytes(of: server.pid)
        let clientExit = try await client.finish(within: 60)
        guard let report = client.jsonLines.last, let seconds = report["seconds"] as? Double,
            let before = report["rss_before"] as? Int, let after = report["rss_after"] as? Int
        else { throw ApplicationFailure("no report from stream-idle-connections") }
        let config = "braid tls \(count) connections"
        bench.results.record(scenario, config, "new connections per second", Double(count) / seconds, "conn/s")
        bench.results.record(scenario, config, "server memory per connection", Double(serverAfter - serverBefore) / Double(count) / 1024, "KiB")
        bench.results.record(scenario, config, "client memory per connection", Double(after - before) / Double(count) / 1024, "KiB")
        if let serverExit = try? await server.stop() { recordCPUPerConnection(bench, config, client: clientExit, server: serverExit, count: count) }

        let rawServer = try bench.role(
            "raw-handshake-server", ["kind": "tls", "port": "0", "threads": "16", "cert": Bench.certificate, "key": Bench.key])
        let rawPort = try await rawServer.listeningPort()
        let (rawReport, rawClientExit) = try await bench.runClient(
            "raw-handshake-client", port: rawPort, ["kind": "tls", "sni": "localhost", "count": String(count), "concurrency": "16"])
        guard let rawSeconds = rawReport["seconds"] as? Double, rawSeconds > 0 else { throw ApplicationFailure("no report from raw-handshake-client") }
        let rawConfig = "raw tcp+tls1.3 \(count) connections"
        bench.results.record(scenario, rawConfig, "new connections per second", Double(count) / rawSeconds, "conn/s")
        if let rawServerExit = try? await rawServer.stop() { recordCPUPerConnection(bench, rawConfig, client: rawClientExit, server: rawServerExit, count: count) }
    }

    /// Each process's CPU time (start-up, and for Braid the idle hold, included) per connection.
    private static func recordCPUPerConnection(_ bench: Bench, _ config: String, client: ChildProcess.Exit, server: ChildProcess.Exit, count: Int) {
        bench.results.record(scenario, config, "client cpu per connection", client.cpuSeconds * 1e6 / Double(count), "us")
        bench.results.record(scenario, config, "server cpu per connection", server.cpuSeconds * 1e6 / Double(count), "us")
    }

    /// Braid QUIC, 1-RTT and resumed with 0-RTT, on loopback or through the emulator.
    static func quic(_ bench: Bench, count: Int, emulated: Bool) async throws {
        // On an early return or throw, ChildProcess's deinit kills the servers.
        let (server, serverPort) = try await bench.quicServer(connections: Int.max)
        var port = serverPort
        var relay: ChildProcess?
        if emulated {
            let emulator = try ChildProcess(
                "python3", ["tools/netem/braid_netem.py", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:\(serverPort)", "--delay-ms", "10"])
            port = try await emulator.listeningPort()
            relay = emulator
        }
        let place = emulated ? "20 ms RTT" : "loopback"
        let rtt = emulated ? emulatedRTT : nil
        for resume in [false, true] {
            bench.row("braid quic \(resume ? "0-rtt" : "1-rtt") \(place)")
            let (report, _) = try await bench.runClient("quic-handshakes", port: port, ["count": String(count), "resume": resume ? "1" : "0"], within: 300)
            let config = "braid quic \(resume ? "0-rtt" : "1-rtt") \(place)"
            if !resume {
                bench.results.recordLatencies(scenario, config, "ready", nanoseconds: samples(report["ready_ns"]), rtt: rtt)
                if !emulated { recordClientCPUPerHandshake(bench, config, report, count: count) }
            } else {
                bench.results.record(scenario, config, "0-rtt accepted", Double(report["early_data"] as? Int ?? 0) / Double(count) * 100, "%")
            }
            bench.results.recordLatencies(scenario, config, "first byte", nanoseconds: samples(report["first_byte_ns"]), rtt: rtt)
        }
        if let relay { _ = try? await relay.stop() }
        _ = try? await server.stop()
    }

    /// TCP, TCP + TLS and Braid QUIC between two network namespaces joined by
    /// `tools/netem/braid_tun_delay.py` (a TUN relay adding 10 ms each way), so TCP sees the
    /// same 20 ms round trip as QUIC.
    static func delayedPath(_ bench: Bench, count: Int) async throws {
        let relay = try ChildProcess("python3", ["tools/netem/braid_tun_delay.py", "--delay-ms", "10"])
        defer { Task { _ = try? await relay.stop() } }
        let deadline = ContinuousClock.now + .seconds(20)
        var fields: [Substring] = []
        while fields.count < 5 {
            fields = relay.output.split(separator: "\n").first { $0.hasPrefix("ready ") }?.split(separator: " ") ?? []
            guard fields.count < 5 else { break }
            guard relay.isRunning, ContinuousClock.now < deadline else {
                bench.results.note("TCP and TLS at 20 ms RTT not measured: the namespace delay path did not start (\(relay.errors.suffix(300)))")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let client = (name: String(fields[1]), host: String(fields[4]))
        let server = (name: String(fields[3]), host: String(fields[4]))
        for kind in ["tcp", "tls"] {
            try await raw(bench, kind: kind, count: count, client: client, server: server)
        }
        try await relay.stop()
    }

    /// TCP connect, or TCP + GnuTLS TLS 1.3 handshake, on raw sockets over loopback (or between
    /// the delay path's namespaces).
    static func raw(
        _ bench: Bench, kind: String, count: Int, client: (name: String, host: String)? = nil, server: (name: String, host: String)? = nil
    ) async throws {
        var flags = ["kind": kind, "port": "0"]
        if kind == "tls" {
            flags["cert"] = Bench.certificate
            flags["key"] = Bench.key
        }
        bench.row(kind == "tls" ? "raw tcp+tls1.3 (gnutls) \(client == nil ? "loopback" : "20 ms RTT")" : "raw tcp connect \(client == nil ? "loopback" : "20 ms RTT")")
        let serverProcess = try bench.role("raw-handshake-server", flags, in: server)
        let port = try await serverProcess.listeningPort()
        var clientFlags = ["kind": kind, "count": String(count)]
        if kind == "tls" { clientFlags["sni"] = "localhost" }
        let (report, _) = try await bench.runClient("raw-handshake-client", port: port, clientFlags, in: client)
        let place = client == nil ? "loopback" : "20 ms RTT"
        let config = kind == "tls" ? "raw tcp+tls1.3 (gnutls) \(place)" : "raw tcp connect \(place)"
        let rtt = client == nil ? nil : emulatedRTT
        bench.results.recordLatencies(scenario, config, "ready", nanoseconds: samples(report["ready_ns"]), rtt: rtt)
        bench.results.recordLatencies(scenario, config, "first byte", nanoseconds: samples(report["first_byte_ns"]), rtt: rtt)
        if kind == "tls", client == nil { recordClientCPUPerHandshake(bench, config, report, count: count) }
        _ = try? await serverProcess.stop()
    }

    /// The client's CPU per sequential connection (handshake, a 1-byte echo, close), from what
    /// the role measured around its loop (its start-up not included).
    private static func recordClientCPUPerHandshake(_ bench: Bench, _ config: String, _ report: [String: Any], count: Int) {
        guard let nanoseconds = (report["cpu_ns"] as? NSNumber)?.doubleValue else { return }
        bench.results.record(scenario, config, "client cpu per handshake", nanoseconds / Double(count) / 1000, "us")
    }

    /// New connections per second to one listener, and memory per idle connection on each
    /// side (resident memory growth over `count` connections).
    static func connectionsAndMemory(_ bench: Bench, count: Int) async throws {
        bench.row("braid quic: connections per second, memory per connection")
        let (server, port) = try await bench.quicServer(connections: Int.max)
        try await Task.sleep(for: .milliseconds(200))
        let serverBefore = residentBytes(of: server.pid)
        let client = try bench.role("quic-idle-connections", ["port": String(port), "ca": Bench.ca, "count": String(count), "concurrency": "16", "hold": "2"])
        let deadline = ContinuousClock.now + .seconds(120)
        while !client.output.contains("holding") {
            guard client.isRunning, ContinuousClock.now < deadline else { throw ApplicationFailure("quic-idle-connections did not open its connections: \(client.errors.suffix(500))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let serverAfter = residentBytes(of: server.pid)
        try await client.finish(within: 60)
        guard let report = client.jsonLines.last, let seconds = report["seconds"] as? Double,
            let before = report["rss_before"] as? Int, let after = report["rss_after"] as? Int
        else { throw ApplicationFailure("no report from quic-idle-connections") }
        let config = "braid quic \(count) connections"
        bench.results.record(scenario, config, "new connections per second", Double(count) / seconds, "conn/s")
        bench.results.record(scenario, config, "server memory per connection", Double(serverAfter - serverBefore) / Double(count) / 1024, "KiB")
        bench.results.record(scenario, config, "client memory per connection", Double(after - before) / Double(count) / 1024, "KiB")
        _ = try? await server.stop()
    }

    static func samples(_ value: Any?) -> [UInt64] {
        (value as? [Any] ?? []).compactMap { ($0 as? NSNumber)?.uint64Value }
    }
}
