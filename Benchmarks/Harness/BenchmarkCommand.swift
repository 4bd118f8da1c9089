import ArgumentParser
import BraidPerf
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `benchmarks`: runs the scenarios side by side and reports them.
struct BenchmarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "benchmarks",
        abstract: "Braid's benchmark suite: establishment, syscalls with and without batching, CPU against raw sockets, throughput.",
        discussion: "Scenarios: \(Scenario.all.map(\.name).joined(separator: ", ")). Run from the repository root (it reads the test certificates).")

    @Flag(help: "Short runs: the whole suite in under two minutes.") var quick = false
    @Option(help: "Run only scenarios whose name contains this (comma-separated list).") var filter: String?
    @Option(help: "Write the results as JSON to this file.") var json: String?
    @Option(help: "Write an HTML report with SVG charts to this file.") var html: String?

    func run() async throws {
        let names = filter.map { $0.split(separator: ",").map(String.init) }
        let chosen = Scenario.all.filter { scenario in names?.contains { scenario.name.contains($0) } ?? true }
        guard !chosen.isEmpty else { throw ValidationError("--filter \(filter ?? ""): no scenario matches") }
        guard FileManager.default.isReadableFile(atPath: Bench.certificate) else {
            throw ValidationError("run from the repository root: \(Bench.certificate) is not readable")
        }
        let results = Results()
        let bench = Bench(quick: quick, results: results)
        if Machine.build == "debug" { emit(Machine.debugWarning + "\n") }
        emit("Braid benchmarks (\(quick ? "quick" : "full") mode, \(Machine.build) build), \(Machine.description["cores"]!) cores, \(Machine.description["cpu"]!)")
        let clock = ContinuousClock()
        for scenario in chosen {
            let started = clock.now
            emit("\n\(scenario.name): \(scenario.summary)")
            do {
                try await Bench.$scenario.withValue(scenario.name) { try await scenario.run(bench) }
            } catch {
                results.note("\(scenario.name) stopped: \(error)")
            }
            emit("  (\(String(format: "%.1f", (clock.now - started).seconds)) s)")
        }
        Report.printTargets(results)
        if let json { try Report.writeJSON(results, to: json) }
        if let html { try Report.writeHTML(results, to: html) }
    }
}

/// A named group of measurements.
struct Scenario: Sendable {
    let name: String
    let summary: String
    let run: @Sendable (Bench) async throws -> Void

    static let all: [Scenario] = [
        Scenario(name: "establishment", summary: "time to ready and to the first response byte; connections per second; memory per idle connection", run: Establishment.run),
        Scenario(name: "syscalls", summary: "system calls per MB on each side, batching on, each switch off, all off", run: Syscalls.run),
        Scenario(name: "cpu", summary: "CPU nanoseconds per byte against raw BSD sockets", run: CPUCost.run),
        Scenario(name: "throughput", summary: "goodput and CPU across configurations", run: Throughput.run),
        Scenario(name: "scaling", summary: "one listener with 1, 2, ... server loops: aggregate goodput and connections per second", run: Scaling.run),
        Scenario(name: "engine", summary: "the sans-IO engine alone, in memory (no sockets)", run: EngineScenarios.run),
        Scenario(name: "stacks", summary: "WebSocket and DTLS echo beside TLV over TLS, Python websockets, QUIC datagrams and raw UDP", run: StackRows.run),
    ]
}

/// What scenarios share: the mode, the results, and starting roles in child processes.
struct Bench: Sendable {
    let quick: Bool
    let results: Results

    /// The scenario running, for the progress lines.
    @TaskLocal static var scenario = ""

    /// Says on standard error which row the suite measures now (`round` of `rounds` when the
    /// rows are measured in repeated rounds), so a long run shows where it is; standard
    /// output, where the results go, is left as it was.
    func row(_ name: String, round: Int? = nil, of rounds: Int? = nil) {
        var line = "[\(Bench.scenario)] \(name)"
        if let round, let rounds, rounds > 1 { line += " (round \(round + 1) of \(rounds))" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static let certificate = "Tests/BraidTests/Fixtures/server.pem"
    static let key = "Tests/BraidTests/Fixtures/server-key.pem"
    static let ca = "Tests/BraidTests/Fixtures/ca.pem"

    /// Starts `benchmarks role <role> <flags>` (under `perf stat` for the syscall tracepoints
    /// when `perfStatFile` is given).
    func role(_ role: String, _ flags: [String: String], perfStatFile: String? = nil, in namespace: (name: String, host: String)? = nil) throws -> ChildProcess {
        let arguments = ["role", role] + flags.sorted { $0.key < $1.key }.flatMap { ["--\($0.key)", $0.value] }
        if let namespace {
            return try ChildProcess("ip", ["netns", "exec", namespace.name, "env", "BRAID_BENCH_HOST=\(namespace.host)", ChildProcess.currentExecutable] + arguments)
        }
        if let perfStatFile {
            return try ChildProcess("perf", ["stat", "-x", ",", "-o", perfStatFile, "-e", PerfStat.events, "--", ChildProcess.currentExecutable] + arguments)
        }
        return try ChildProcess(ChildProcess.currentExecutable, arguments)
    }

    /// A QUIC server role serving `connections` connections.
    func quicServer(_ config: [String: String] = [:], connections: Int, perfStatFile: String? = nil) async throws -> (ChildProcess, UInt16) {
        var flags = config
        flags["cert"] = Self.certificate
        flags["key"] = Self.key
        flags["connections"] = String(connections)
        let server = try role("quic-server", flags, perfStatFile: perfStatFile)
        return (server, try await server.listeningPort())
    }

    /// Runs a client role to completion; returns its JSON report and how it exited.
    func runClient(
        _ role: String, port: UInt16, _ config: [String: String], perfStatFile: String? = nil, within seconds: Double = 600,
        in namespace: (name: String, host: String)? = nil
    ) async throws -> ([String: Any], ChildProcess.Exit) {
        var flags = config
        flags["port"] = String(port)
        flags["ca"] = Self.ca
        let client = try self.role(role, flags, perfStatFile: perfStatFile, in: namespace)
        let exit = try await client.finish(within: seconds)
        guard exit.status == 0, let report = client.jsonLines.last else {
            throw ApplicationFailure("\(role) exited \(exit.status): \(client.errors.suffix(600))")
        }
        return (report, exit)
    }

    /// Runs a server role and a client role against each other; returns both reports and exits.
    func pair(
        server serverRole: String, client clientRole: String, serverFlags: [String: String], clientFlags: [String: String],
        perfStat: Bool = false
    ) async throws -> (client: [String: Any], clientExit: ChildProcess.Exit, server: [String: Any], serverExit: ChildProcess.Exit, perf: (client: [String: Int], server: [String: Int])?) {
        let directory = FileManager.default.temporaryDirectory.path
        let serverPerf = perfStat ? "\(directory)/braid-perf-server-\(UUID().uuidString)" : nil
        let clientPerf = perfStat ? "\(directory)/braid-perf-client-\(UUID().uuidString)" : nil
        let server = try role(serverRole, serverFlags, perfStatFile: serverPerf)
        let port = try await server.listeningPort()
        let (clientReport, clientExit) = try await runClient(clientRole, port: port, clientFlags, perfStatFile: clientPerf)
        // Beyond the server's 30 s idle timeout: should the client's close be lost, the server
        // still ends, later.
        let serverExit = try await server.finish(within: 45)
        guard serverExit.status == 0, let serverReport = server.jsonLines.last else {
            throw ApplicationFailure("\(serverRole) exited \(serverExit.status): \(server.errors.suffix(600))")
        }
        var perf: (client: [String: Int], server: [String: Int])?
        if let serverPerf, let clientPerf { perf = (PerfStat.read(clientPerf), PerfStat.read(serverPerf)) }
        return (clientReport, clientExit, serverReport, serverExit, perf)
    }
}

/// Syscall tracepoint counts from `perf stat -x,`.
enum PerfStat {
    static let calls = ["sendmsg", "sendmmsg", "recvmsg", "recvmmsg", "sendto", "recvfrom", "write", "read"]
    /// Counted beside the socket calls: futex, the calls threads make to wait for and wake one
    /// another (a hand-off between the loop and the application's tasks that sleeps or wakes).
    static let waits = ["futex"]
    static var events: String { (calls + waits).map { "syscalls:sys_enter_\($0)" }.joined(separator: ",") }

    /// Whether `perf stat` can count syscall tracepoints here.
    static let available: Bool = {
        guard let probe = try? ChildProcess("perf", ["stat", "-x", ",", "-e", "syscalls:sys_enter_getpid", "--", "true"]) else { return false }
        while probe.isRunning { usleep(10_000) }
        return probe.errors.contains("sys_enter_getpid") && !probe.errors.contains("not supported")
    }()

    static func read(_ file: String) -> [String: Int] {
        defer { try? FileManager.default.removeItem(atPath: file) }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return [:] }
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count > 2, let count = Int(fields[0]), let event = fields[2].split(separator: "_").last else { continue }
            counts[String(event)] = count
        }
        return counts
    }
}
