import BraidPerf
import Foundation

/// One HTTP/3 download between two processes: Braid's (`braid serve --alpn h3` and `braid get`,
/// the tool built beside this program) or ngtcp2's example pair. Both are timed alike, from
/// starting the client to its exit (handshake and process start included), and both ends' CPU
/// comes from each process's resource usage.
struct HTTP3Download {
    var goodputGbits: Double
    var bytes: Double
    var clientCPU: Double
    var serverCPU: Double

    var cpuNanosecondsPerByte: (client: Double, server: Double, total: Double) {
        (clientCPU * 1e9 / bytes, serverCPU * 1e9 / bytes, (clientCPU + serverCPU) * 1e9 / bytes)
    }

    /// The `braid` tool beside this program (`swift build -c release --product braid`), or nil.
    static var braidTool: String? {
        let directory = URL(fileURLWithPath: ChildProcess.currentExecutable).deletingLastPathComponent().path
        let path = directory + "/braid"
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    /// Braid's server answering `/N` with N bytes, and `braid get` fetching `/bytes` once.
    static func braid(_ tool: String, bytes: Int) async throws -> HTTP3Download {
        let server = try ChildProcess(tool, ["serve", "--alpn", "h3", "--host", "127.0.0.1", "--port", "0", "--cert", Bench.certificate, "--key", Bench.key])
        let client: ChildProcess, exit: ChildProcess.Exit, seconds: Double
        do {
            let port = try await server.listeningPort()
            let start = ContinuousClock.now
            client = try ChildProcess(
                tool, ["get", "--json", "--ca", Bench.ca, "--sni", "localhost", "--timeout", "300", "https://127.0.0.1:\(port)/\(bytes)"])
            exit = try await client.finish(within: 300)
            seconds = (ContinuousClock.now - start).seconds
        } catch {
            _ = try? await server.stop()
            throw error
        }
        let serverExit = try await server.stop()
        guard exit.status == 0, let report = client.jsonLines.last, report["bytes"] as? Int == bytes else {
            throw ApplicationFailure("braid get exited \(exit.status) (\(client.output.suffix(300))): \(client.errors.suffix(400))")
        }
        return HTTP3Download(
            goodputGbits: Double(bytes) * 8 / seconds / 1e9, bytes: Double(bytes), clientCPU: exit.cpuSeconds, serverCPU: serverExit.cpuSeconds)
    }

    /// ngtcp2's example server and client (Debian's ngtcp2-server/-client), the file of `bytes`.
    static func ngtcp2(
        _ pair: (server: (UInt16) -> [String], client: (UInt16) -> [String], cleanup: () -> Void), bytes: Int
    ) async throws -> HTTP3Download {
        let port = try freePort(.udp)
        let serverArgv = pair.server(port), clientArgv = pair.client(port)
        let server = try ChildProcess(serverArgv[0], Array(serverArgv.dropFirst()))
        // gtlsserver prints nothing when it is ready.
        try await Task.sleep(for: .milliseconds(300))
        let start = ContinuousClock.now
        let client: ChildProcess, exit: ChildProcess.Exit
        do {
            client = try ChildProcess(clientArgv[0], Array(clientArgv.dropFirst()))
            exit = try await client.finish(within: 300)
        } catch {
            _ = try? await server.stop()
            throw error
        }
        let seconds = (ContinuousClock.now - start).seconds
        let serverExit = try await server.stop()
        guard exit.status == 0 else { throw ApplicationFailure("ngtcp2 example client exited \(exit.status): \(client.errors.suffix(400))") }
        return HTTP3Download(
            goodputGbits: Double(bytes) * 8 / seconds / 1e9, bytes: Double(bytes), clientCPU: exit.cpuSeconds, serverCPU: serverExit.cpuSeconds)
    }
}
