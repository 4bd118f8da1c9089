import BraidCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process whose output goes to files (readable while it runs), reaped with wait4 so
/// its CPU time is known. The benchmarks run each end of a measurement in one; the interop
/// tests run the peers in them.
///
/// Spawned with posix_spawn: Foundation's `Process` did not notice its children exit inside
/// the test runner, and it does not report their resource usage.
package final class ChildProcess: Sendable {
    /// How a child ended.
    package struct Exit: Sendable {
        /// The exit code, or 128 + the signal number, as shells report it.
        package var status: Int32
        /// User and system CPU time of the child (and of children it reaped).
        package var userSeconds: Double
        package var systemSeconds: Double
        package var cpuSeconds: Double { userSeconds + systemSeconds }
        /// Peak resident memory in bytes.
        package var maxResidentBytes: Int
        /// Context switches of all the child's threads, voluntary (waiting) and involuntary.
        package var contextSwitches: Int = 0
    }

    package let pid: pid_t
    package let commandLine: String
    private let exit = Locked<Exit?>(nil)
    private let outputFile: URL
    private let errorFile: URL

    /// Starts `executable` with `arguments`; the child starts with no blocked signals and
    /// default handlers (the parent's threads may block or ignore SIGTERM, and both would carry
    /// over the exec). `standardInput`, if given, is a descriptor the child reads as its
    /// standard input (the parent keeps its own); otherwise the child inherits the parent's.
    package init(_ executable: String, _ arguments: [String], standardInput: Int32? = nil) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        outputFile = directory.appendingPathComponent("stdout")
        errorFile = directory.appendingPathComponent("stderr")
        commandLine = ([executable] + arguments).joined(separator: " ")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let standardInput { posix_spawn_file_actions_adddup2(&actions, standardInput, 0) }
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
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        _ = ExecMarker.shared  // before the first spawn, so every child starts with it (`hasExecuted`)
        var child: pid_t = 0
        let rc = posix_spawnp(&child, executable, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw ApplicationFailure("cannot start \(commandLine): \(String(cString: strerror(rc)))") }
        pid = child
    }

    /// Whether the child has finished exec'ing its executable, so its descriptor table is its
    /// own. posix_spawn returns once the child has left the parent's memory, which the kernel
    /// does before it closes the close-on-exec descriptors; until then the child's table is a
    /// copy of the parent's, with sockets the parent may have closed since (they stay open, and
    /// listening, in the copy). The kernel closes close-on-exec descriptors in ascending order,
    /// so the child is past that once `ExecMarker`'s descriptor, the highest this process
    /// holds, is gone from its table.
    package var hasExecuted: Bool {
        guard let marker = ExecMarker.shared else { return true }
        let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(marker.descriptor)")
        return target != marker.target
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
    }

    /// This program's own executable, to start it again in another role.
    package static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// Reaps the child if it has exited.
    package var isRunning: Bool {
        exit.withLock { exit in
            guard exit == nil else { return false }
            var raw: Int32 = 0
            var usage = rusage()
            guard wait4(pid, &raw, WNOHANG, &usage) == pid else { return true }
            exit = Exit(
                status: raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f),
                userSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6,
                systemSeconds: Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6,
                maxResidentBytes: usage.ru_maxrss * 1024, contextSwitches: usage.ru_nvcsw + usage.ru_nivcsw)
            return false
        }
    }

    package var output: String { String(data: Self.contents(of: outputFile), encoding: .utf8) ?? "" }
    /// Standard output as bytes (`output` is empty when they are not UTF-8).
    package var outputBytes: [UInt8] { [UInt8](Self.contents(of: outputFile)) }
    package var errors: String { String(data: Self.contents(of: errorFile), encoding: .utf8) ?? "" }

    /// The file's bytes, empty if it cannot be read. An empty file is not handed to Foundation:
    /// on Linux its read of a file whose size is 0 leaks a 4 KiB buffer every time
    /// (`Data(contentsOf:)` and `String(contentsOf:)` alike), and `listeningPort` polls the
    /// output file while the child has printed nothing yet.
    private static func contents(of file: URL) -> Data {
        var info = stat()
        guard stat(file.path, &info) == 0, info.st_size > 0 else { return Data() }
        return (try? Data(contentsOf: file)) ?? Data()
    }

    /// The JSON objects printed so far, one per line.
    package var jsonLines: [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits for the `listening <port>` line that servers print first. The default wait is
    /// generous: on a loaded machine a debug build or a Python interpreter can take many
    /// seconds to start. The output is read once more after the deadline, so a wait that
    /// itself resumed late still sees a line printed meanwhile.
    package func listeningPort(within seconds: Double = 90) async throws -> UInt16 {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let pastDeadline = Date() >= deadline
            let running = isRunning
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }),
                let port = UInt16(line.dropFirst("listening ".count))
            {
                return port
            }
            guard running, !pastDeadline else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ApplicationFailure(
            "no `listening` line from \(commandLine) within \(seconds) s (\(isRunning ? "still running" : "exited"))\nstdout: \(output)\nstderr: \(errors)")
    }

    /// Waits for the child to exit; kills it and throws after `seconds`.
    @discardableResult
    package func finish(within seconds: Double = 60) async throws -> Exit {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        if isRunning {
            kill(pid, SIGKILL)
            while isRunning { try await Task.sleep(for: .milliseconds(5)) }
            throw ApplicationFailure("\(commandLine) did not finish within \(seconds) s\nstdout: \(output)\nstderr: \(errors)")
        }
        return exit.withLock { $0! }
    }

    /// Asks the child to stop (SIGTERM) and waits for it.
    @discardableResult
    package func stop(within seconds: Double = 10) async throws -> Exit {
        if isRunning { kill(pid, SIGTERM) }
        return try await finish(within: seconds)
    }

    /// Waits until a JSON line satisfying `match` appears (read once more after the deadline).
    package func jsonLine(within seconds: Double = 60, where match: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let pastDeadline = Date() >= deadline
            if let line = jsonLines.first(where: match) { return line }
            if pastDeadline { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ApplicationFailure("no matching JSON line from \(commandLine)\nstdout: \(output)\nstderr: \(errors)")
    }
}

/// A close-on-exec descriptor at the top of this process's descriptor range, kept open for the
/// process's life: a child whose table still holds it has not finished its exec (see
/// `ChildProcess.hasExecuted`).
struct ExecMarker: Sendable {
    let descriptor: Int32
    /// What /proc shows the descriptor pointing at (a deleted temporary file of this process).
    let target: String

    static let shared: ExecMarker? = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("braid-exec-marker-\(getpid())-\(UUID().uuidString)").path
        let opened = open(path, O_CREAT | O_RDONLY | O_CLOEXEC, 0o600)
        guard opened >= 0 else { return nil }
        unlink(path)
        defer { close(opened) }
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        // Near the top of the allowed range, below anything a busy test run reaches.
        let highest = Int32(clamping: min(limit.rlim_cur, 65536)) - 1
        let descriptor = fcntl(opened, F_DUPFD_CLOEXEC, max(highest - 8, 3))
        guard descriptor >= 0, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
        else { return nil }
        return ExecMarker(descriptor: descriptor, target: target)
    }()
}
