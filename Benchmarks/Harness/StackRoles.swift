import Braid
import BraidPerf
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The perf and echo applications over any stack but QUIC (`ApplicationStack`), as `braid
/// serve --stack` and `braid client --stack` run them: the same BraidPerf code, in roles.
extension Roles {
    /// `app-server --stack S [--alpn echo|perf]`: serves until SIGTERM, then prints the sum of
    /// its connections' reports: `{"connections", "messages_echoed", "bytes_echoed"}`.
    static func appServer(_ flags: Flags) async throws {
        guard let stack = ApplicationStack(rawValue: flags["stack"] ?? ""), stack != .quic else {
            throw ApplicationFailure("--stack must be one of tls, tcp, udp, dtls, ws, wss (quic: quic-server)")
        }
        let identity = stack.isSecure ? ServerIdentity(certificateChainFile: flags["cert"] ?? "", privateKeyFile: flags["key"] ?? "") : nil
        let totals = Mutex<(connections: Int, messages: Int, bytes: Int, errors: [String])>((0, 0, 0, []))
        let serving = Task {
            try await ApplicationServer.run(
                stack: stack, host: benchHost, port: 0, applications: [flags["alpn"] ?? EchoService.alpn], identity: identity,
                listening: { FileHandle.standardOutput.write(Data("listening \($0)\n".utf8)) },
                report: { report in
                    totals.withLock {
                        $0.connections += 1
                        $0.messages += report["messages_echoed"] as? Int ?? 0
                        $0.bytes += report["bytes_echoed"] as? Int ?? 0
                        if let error = report["error"] as? String { $0.errors.append(error) }
                    }
                })
        }
        let terminated = AsyncStream<Void>.makeStream()
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM)
        signal(SIGTERM, SIG_IGN)
        terminate.setEventHandler { terminated.continuation.finish() }
        terminate.resume()
        for await _ in terminated.stream {}
        serving.cancel()
        try await serving.value
        let counted = totals.withLock { $0 }
        printJSON(["connections": counted.connections, "messages_echoed": counted.messages, "bytes_echoed": counted.bytes, "errors": counted.errors])
    }

    /// `app-client --stack S --alpn echo|perf [--datagrams N --datagram-size B] [--streams K
    /// --bytes B | --download B --upload B]`: one `ApplicationClient` run against `app-server`,
    /// printing its report (`braid client --json`'s fields).
    static func appClient(_ flags: Flags) async throws {
        guard let stack = ApplicationStack(rawValue: flags["stack"] ?? ""), stack != .quic else {
            throw ApplicationFailure("--stack must be one of tls, tcp, udp, dtls, ws, wss (quic: quic-client)")
        }
        var options = ApplicationClient.Options(alpn: flags["alpn"] ?? EchoService.alpn)
        options.streams = flags.int("streams", 0)
        options.download = flags.int("download", 0)
        options.upload = flags.int("upload", 0)
        options.bytes = flags.int("bytes", 0)
        options.datagrams = flags.int("datagrams", 0)
        options.datagramSize = flags.int("datagram-size", 1000)
        options.datagramWindow = flags.int("window", stack.datagramWindow)
        let trust = ClientTrust(certificateAuthorities: flags["ca"], serverName: "localhost")
        let transport = try ApplicationClient.transport(
            stack: stack, host: benchHost, port: UInt16(flags.int("port", 0)), application: options.alpn, trust: trust)
        let report = try await ApplicationClient(options: options, transport: transport).perform()
        await transport.close(applicationErrorCode: 0, reason: "")
        guard report.ok else { throw ApplicationFailure(report.failures.joined(separator: "; ")) }
        printJSON(report.json)
    }
}
