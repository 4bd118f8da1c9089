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
    /// tools/install-deps.sh makes, else python3 from PATH.
    static var python: String {
        if let chosen = ProcessInfo.processInfo.environment["BRAID_PYTHON"] { return chosen }
        let project = repository.appendingPathComponent(".build-python/bin/python3").path
        return FileManager.default.isExecutableFile(atPath: project) ? project : "python3"
    }

    static func aioquic(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(python, [repository.appendingPathComponent("Tests/Interop/peers/aioquic_peer.py").path] + arguments)
    }

    /// aioquic's HTTP/3 server and client (`aioquic_h3_peer.py`).
    static func aioquicHTTP3(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(python, [repository.appendingPathComponent("Tests/Interop/peers/aioquic_h3_peer.py").path] + arguments)
    }

    /// Malformed HTTP/3 and QPACK on aioquic, as a client or a server (`aioquic_h3_hostile.py`).
    static func aioquicHTTP3Hostile(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(python, [repository.appendingPathComponent("Tests/Interop/peers/aioquic_h3_hostile.py").path] + arguments)
    }

    /// The aioquic client that breaks a server's limits on purpose (`hostile_peer.py`).
    static func hostile(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(python, [repository.appendingPathComponent("Tests/Interop/peers/hostile_peer.py").path] + arguments)
    }

    static func emulator(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(python, [repository.appendingPathComponent("tools/netem/braid_netem.py").path] + arguments)
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
