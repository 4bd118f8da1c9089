import BraidPerf
import Testing

/// Which implementation is the client and which the server.
enum InteropDirection: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case aioquicClientToBraidServer = "aioquic client -> braid server"
    case braidClientToAioquicServer = "braid client -> aioquic server"

    var testDescription: String { rawValue }

    /// Starts the server side on a system-chosen loopback port.
    func startServer(_ extra: [String] = []) async throws -> (server: ChildProcess, port: UInt16) {
        let common = ["server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")]
        let server: ChildProcess
        switch self {
        case .aioquicClientToBraidServer: server = try PeerProcess.braid(["serve"] + common.dropFirst() + ["--json"] + extra)
        case .braidClientToAioquicServer: server = try PeerProcess.aioquic(common + ["--log-key-updates"] + extra)
        }
        return (server, try await server.listeningPort())
    }

    /// Starts the client side against `port`; the flags are common to both tools.
    func startClient(port: UInt16, _ arguments: [String]) throws -> ChildProcess {
        let common = ["--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--timeout", "60"]
        switch self {
        case .aioquicClientToBraidServer: return try PeerProcess.aioquic(["client"] + common + arguments)
        // Both peers send Braid's pattern, so Braid's client checks every byte as aioquic's does.
        case .braidClientToAioquicServer: return try PeerProcess.braid(["client"] + common + ["--json", "--verify-pattern"] + arguments)
        }
    }
}
