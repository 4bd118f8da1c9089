import Foundation
import Glibc
import Synchronization
import Testing

/// Processes the interop tests run: the `braid` tool, the aioquic peer and the network
/// emulator. Each writes to a file so a long-running server's output can be read at any time.
///
/// Spawned with posix_spawn and reaped with waitpid: Foundation's `Process` did not notice
/// its children exit inside the test runner.
final class PeerProcess: Sendable {
    private let pid: pid_t
    private let exitStatus = Mutex<Int32?>(nil)
    private let outputFile: URL
    private let errorFile: URL
    let commandLine: String

    /// The repository root (this file is Tests/BraidTests/Interop/InteropSupport.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `braid` tool next to the test bundle (`swift build --build-tests` builds it).
    static var braid: String {
        get throws {
            let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            for candidate in [directory, directory.deletingLastPathComponent()] {
                let path = candidate.appendingPathComponent("braid").path
                if FileManager.default.isExecutableFile(atPath: path) { return path }
            }
            throw InteropFailure("the braid tool is not built next to \(directory.path): run `swift build --build-tests`")
        }
    }

    /// The Python with aioquic: $BRAID_PYTHON, else the project's environment that
    /// tools/install-deps.sh makes, else python3 from PATH.
    static var python: String {
        if let chosen = ProcessInfo.processInfo.environment["BRAID_PYTHON"] { return chosen }
        let project = repository.appendingPathComponent(".build-python/bin/python3").path
        return FileManager.default.isExecutableFile(atPath: project) ? project : "/usr/bin/env"
    }
    private static var pythonArguments: [String] { python == "/usr/bin/env" ? ["python3"] : [] }

    static func aioquic(_ arguments: [String]) throws -> PeerProcess {
        try PeerProcess(python, pythonArguments + [repository.appendingPathComponent("Tests/Interop/peers/aioquic_peer.py").path] + arguments)
    }

    static func emulator(_ arguments: [String]) throws -> PeerProcess {
        try PeerProcess(python, pythonArguments + [repository.appendingPathComponent("tools/netem/braid_netem.py").path] + arguments)
    }

    static func braid(_ arguments: [String]) throws -> PeerProcess { try PeerProcess(try braid, arguments) }

    init(_ executable: String, _ arguments: [String]) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        outputFile = directory.appendingPathComponent("stdout")
        errorFile = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        commandLine = ([executable] + arguments).joined(separator: " ")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorFile.path, O_WRONLY | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // The child starts with no blocked signals and default handlers: the test runner's
        // threads may block or ignore SIGTERM, and both carry over an exec.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw InteropFailure("cannot start \(commandLine): \(String(cString: strerror(rc)))") }
        pid = child
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
    }

    /// Reaps the child if it exited.
    private var isRunning: Bool {
        exitStatus.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
            // Exit code, or 128 + signal number as shells report it.
            status = raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            return false
        }
    }

    var output: String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }

    /// The JSON objects printed so far, one per line.
    var jsonLines: [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits for the `listening <port>` line servers and the emulator print first.
    func listeningPort(within seconds: Double = 20) async throws -> UInt16 {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }),
                let port = UInt16(line.dropFirst("listening ".count))
            {
                return port
            }
            guard isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw InteropFailure("no `listening` line from \(commandLine)\nstderr: \(errors)")
    }

    /// Waits for the process to exit (killing it after `seconds`); returns its exit status.
    @discardableResult
    func finish(within seconds: Double = 60) async throws -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        if isRunning {
            kill(pid, SIGKILL)
            _ = await finishAfterSignal()
            throw InteropFailure("\(commandLine) did not finish within \(seconds) s\nstdout: \(output)\nstderr: \(errors)")
        }
        return exitStatus.withLock { $0 } ?? -1
    }

    private func finishAfterSignal() async -> Int32? {
        while isRunning { try? await Task.sleep(for: .milliseconds(10)) }
        return exitStatus.withLock { $0 }
    }

    /// Stops a server and waits for it to exit.
    func stop() async {
        if isRunning { kill(pid, SIGTERM) }
        _ = try? await finish(within: 10)
    }

    /// Waits until a JSON line satisfying `match` appears (servers print one per connection).
    func jsonLine(within seconds: Double = 10, where match: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = jsonLines.first(where: match) { return line }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw InteropFailure("no matching JSON line from \(commandLine)\nstdout: \(output)\nstderr: \(errors)")
    }
}

struct InteropFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a client to completion and returns its one JSON object; records an issue with its
/// output if it exits non-zero.
func runClient(_ client: PeerProcess, within seconds: Double = 90) async throws -> [String: Any] {
    let status = try await client.finish(within: seconds)
    let report = client.jsonLines.last ?? [:]
    #expect(status == 0, "\(client.commandLine) exited \(status)\nstdout: \(client.output)\nstderr: \(client.errors)")
    return report
}
