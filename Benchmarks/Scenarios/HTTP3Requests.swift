import BraidPerf
import Foundation

/// Small HTTP/3 requests on one connection: Braid's server (`braid serve --alpn h3`, the tool
/// built beside this program) answering `/1024` with 1 KiB, the `http3-client` role keeping 100
/// requests in flight. CPU per request is each whole process's (its handshake and first
/// request included) over the timed requests.
struct HTTP3Requests {
    var requestsPerSecond: Double
    var clientMicroseconds: Double
    var serverMicroseconds: Double
    var totalMicroseconds: Double { clientMicroseconds + serverMicroseconds }

    static func run(_ tool: String, requests: Int, size: Int = 1024, concurrency: Int = 100) async throws -> HTTP3Requests {
        let server = try ChildProcess(tool, ["serve", "--alpn", "h3", "--host", "127.0.0.1", "--port", "0", "--cert", Bench.certificate, "--key", Bench.key])
        let client: ChildProcess, exit: ChildProcess.Exit
        do {
            let port = try await server.listeningPort()
            client = try ChildProcess(
                ChildProcess.currentExecutable,
                [
                    "role", "http3-client", "--port", String(port), "--ca", Bench.ca, "--path", "/\(size)",
                    "--requests", String(requests), "--concurrency", String(concurrency),
                ])
            exit = try await client.finish(within: 300)
        } catch {
            _ = try? await server.stop()
            throw error
        }
        let serverExit = try await server.stop()
        guard exit.status == 0, let report = client.jsonLines.last, let seconds = report["seconds"] as? Double, seconds > 0 else {
            throw ApplicationFailure("http3-client exited \(exit.status): \(client.errors.suffix(400))")
        }
        let count = Double(requests)
        return HTTP3Requests(
            requestsPerSecond: count / seconds, clientMicroseconds: exit.cpuSeconds * 1e6 / count, serverMicroseconds: serverExit.cpuSeconds * 1e6 / count)
    }
}
