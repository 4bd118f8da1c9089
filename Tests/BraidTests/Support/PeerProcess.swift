import BraidPerf
import Foundation
import Testing

/// The processes the interop tests run: the `braid` tool, the aioquic peer and the network
/// emulator, as `ChildProcess`es (output in files, reaped with wait4).
enum PeerProcess {
    /// The repository root (this file is Tests/BraidTests/Support/PeerProcess.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `braid` tool next to the test bundle (`swift build --build-tests` builds it).
    static var braidTool: String {
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
    /// tools/install-deps.sh makes. Without either, the aioquic peers fail with that fix in
    /// the error, not with an import error from some other Python (or 150 timeouts).
    static var aioquicPython: String {
        get throws {
            if let chosen = ProcessInfo.processInfo.environment["BRAID_PYTHON"] { return chosen }
            let project = repository.appendingPathComponent(".build-python/bin/python3").path
            guard FileManager.default.isExecutableFile(atPath: project) else {
                throw InteropFailure(
                    "aioquic's Python environment \(project) is missing: run tools/install-deps.sh (the README's test command does), or set BRAID_PYTHON")
            }
            return project
        }
    }

    /// A peer script of this repository, run by the Python with aioquic.
    private static func aioquicScript(_ path: String, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try aioquicPython, [repository.appendingPathComponent(path).path] + arguments)
    }

    static func aioquic(_ arguments: [String]) throws -> ChildProcess {
        try aioquicScript("Tests/Interop/peers/aioquic_peer.py", arguments)
    }

    /// aioquic's HTTP/3 server and client (`aioquic_h3_peer.py`).
    static func aioquicHTTP3(_ arguments: [String]) throws -> ChildProcess {
        try aioquicScript("Tests/Interop/peers/aioquic_h3_peer.py", arguments)
    }

    /// Malformed HTTP/3 and QPACK on aioquic, as a client or a server (`aioquic_h3_hostile.py`).
    static func aioquicHTTP3Hostile(_ arguments: [String]) throws -> ChildProcess {
        try aioquicScript("Tests/Interop/peers/aioquic_h3_hostile.py", arguments)
    }

    /// The aioquic client that breaks a server's limits on purpose (`hostile_peer.py`).
    static func hostile(_ arguments: [String]) throws -> ChildProcess {
        try aioquicScript("Tests/Interop/peers/hostile_peer.py", arguments)
    }

    /// The network emulator: standard library only, so any python3 runs it.
    static func emulator(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess("python3", [repository.appendingPathComponent("tools/netem/braid_netem.py").path] + arguments)
    }

    static func braid(_ arguments: [String]) throws -> ChildProcess { try ChildProcess(try braidTool, arguments) }
}

struct InteropFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension ChildProcess {
    /// Stops a server, ignoring how it ends.
    func stop() async { _ = try? await stop(within: 10) }
}

/// Runs a client to completion and returns its one JSON object; records an issue with its
/// output if it exits non-zero.
func runClient(_ client: ChildProcess, within seconds: Double = 90) async throws -> [String: Any] {
    let status = try await client.finish(within: seconds).status
    let report = client.jsonLines.last ?? [:]
    #expect(status == 0, "\(client.commandLine) exited \(status)\nstdout: \(client.output)\nstderr: \(client.errors)")
    return report
}
