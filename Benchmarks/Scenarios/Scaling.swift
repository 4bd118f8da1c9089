import BraidPerf
import Foundation

/// Scenario: one QUIC listener with 1, 2, ... server loops (`QUIC.serverLoops`, one
/// `SO_REUSEPORT` socket and thread each) up to the machine's cores: the aggregate goodput of
/// several clients downloading at once, and new connections per second (in all, and per loop).
///
/// The clients run on the same machine, so they take cores from the server: on a machine with
/// few cores the rows show what the whole machine does, and a second loop helps only as far as
/// a core is free for it. On a larger machine, with the clients elsewhere (BRAID_BENCH_HOST),
/// goodput and handshakes should grow with the loops until the network or the clients limit.
enum Scaling {
    static let scenario = "scaling"

    static func run(_ bench: Bench) async throws {
        let cores = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let clients = 4
        let bytes = (bench.quick ? 64 : 400) * 1_000_000
        let handshakes = bench.quick ? 300 : 2000
        let rounds = bench.quick ? 1 : 3
        var goodputs: [Int: [Double]] = [:], rates: [Int: [Double]] = [:]
        for round in 0..<rounds {
            for loops in 1...min(cores, 8) {
                bench.row("quic listener, \(loops) server loop\(loops == 1 ? "" : "s")", round: round, of: rounds)
                goodputs[loops, default: []].append(try await goodput(bench, loops: loops, clients: clients, bytes: bytes))
                rates[loops, default: []].append(try await handshakeRate(bench, loops: loops, count: handshakes))
            }
        }
        for loops in 1...min(cores, 8) {
            let config = "quic listener, \(loops) server loop\(loops == 1 ? "" : "s")"
            bench.results.recordRepeated(scenario, config, "goodput, \(clients) clients at once", goodputs[loops] ?? [], "Gbit/s")
            bench.results.recordRepeated(scenario, config, "connections per second", rates[loops] ?? [], "conn/s")
            bench.results.recordRepeated(scenario, config, "connections per second per loop", (rates[loops] ?? []).map { $0 / Double(loops) }, "conn/s")
        }
    }

    /// `clients` client processes, each downloading `bytes / clients` on one stream at the same
    /// time: all the bytes over the time from the first start to the last end, in Gbit/s.
    static func goodput(_ bench: Bench, loops: Int, clients: Int, bytes: Int) async throws -> Double {
        let (server, port) = try await bench.quicServer(["loops": String(loops)], connections: clients)
        let each = bytes / clients
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<clients {
                group.addTask {
                    _ = try await bench.runClient("quic-client", port: port, ["alpn": "perf", "download": String(each)])
                }
            }
            try await group.waitForAll()
        }
        let seconds = (ContinuousClock.now - start).seconds
        let exit = try await server.finish(within: 45)
        guard exit.status == 0 else { throw ApplicationFailure("quic-server exited \(exit.status): \(server.errors.suffix(400))") }
        return Double(each * clients) * 8 / seconds / 1e9
    }

    /// `count` new connections, 16 at a time, each until ready: connections per second.
    static func handshakeRate(_ bench: Bench, loops: Int, count: Int) async throws -> Double {
        let (server, port) = try await bench.quicServer(["loops": String(loops)], connections: Int.max)
        let report: [String: Any]
        do {
            (report, _) = try await bench.runClient("quic-idle-connections", port: port, ["count": String(count), "concurrency": "16", "hold": "0"])
        } catch {
            _ = try? await server.stop()
            throw error
        }
        _ = try? await server.stop()
        guard let seconds = report["seconds"] as? Double, seconds > 0 else { throw ApplicationFailure("no report from quic-idle-connections") }
        return Double(count) / seconds
    }
}
