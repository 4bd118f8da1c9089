import ArgumentParser
import Braid
import BraidPerf
import BraidServiceLifecycle
import Foundation
import ServiceLifecycle

/// `braid serve`: a server for the perf and echo applications over QUIC or another stack.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the perf and echo applications over QUIC (or --stack), or HTTP/3 (--alpn h3).",
        discussion: """
            --stack tls serves both applications (the client picks one with ALPN); --stack tcp, \
            udp, dtls, ws and wss serve one, --alpn perf or echo (default echo; udp and dtls echo \
            only). The options from --retry to --loops, and the batching switches, are QUIC's.

            With --alpn h3, serves HTTP/3 instead: the files under --root (GET and HEAD; `/` is \
            index.html), and `/N` (N decimal digits, no such file) with N bytes, as ngtcp2's \
            example server does.

            Prints `listening <port>` once bound. With --json, prints one JSON object per connection \
            when it ends: how it ended (the peer's application error code and reason), its \
            application, streams served, whether uploads were intact and 0-RTT was accepted.

            SIGTERM or SIGINT shuts down gracefully: no new connections, every connection closed \
            with application error code 0, exit status 0 once the closes are sent. A second \
            signal, or a shutdown still running after 10 seconds, exits at once.
            """)

    @Option(help: "Stack: \(ApplicationStack.names).") var stack: ApplicationStack = .quic
    @Option(help: "Address to listen on (an IP literal).") var host = "0.0.0.0"
    @Option(help: "Port (0: the system chooses; UDP for quic, udp and dtls, TCP for the others).") var port: NWEndpoint.Port = 4433
    @Option(help: "Certificate chain (PEM; quic, tls, dtls and wss).") var cert: String?
    @Option(help: "Private key (PEM; quic, tls, dtls and wss).") var key: String?
    @Option(help: "Application protocols to offer, comma-separated (perf, echo; default both over quic and tls, echo over the others), or h3 alone for HTTP/3.")
    var alpn: String?
    @Option(help: "HTTP/3: the directory whose files are served.") var root: String?
    @Flag(help: "Validate every client's address with a Retry packet first (without it, Retry turns on by itself under load).")
    var retry = false
    @Option(name: .customLong("connection-limit"), help: "Most connections at once, per loop; at the limit the longest-idle one makes room.")
    var connectionLimit = 10_000
    @Option(name: .customLong("connection-limit-per-address"), help: "Most connections from one IP address, per loop (0: no limit).")
    var connectionLimitPerAddress = 1_000
    @Option(name: .customLong("retry-threshold"), help: "Half-open handshakes at which Retry turns on by itself, per loop.")
    var retryThreshold = 250
    @Option(name: .customLong("half-open-limit"), help: "Most half-open handshakes at once, per loop.")
    var halfOpenLimit = 1_000
    @Option(name: .customLong("qlog-dir"), help: "Write a qlog file per connection into this directory.") var qlogDirectory: String?
    @Option(help: "Event loops (cores) serving connections.") var loops = 1
    @OptionGroup var batching: BatchingFlags
    @OptionGroup(title: "Behind a QUIC load balancer") var fleet: FleetFlags
    @Flag(help: "One JSON line per finished connection.") var json = false
    @Option(name: .customLong("requests-per-connection"), help: "HTTP/3: shut a connection down gracefully (GOAWAY) once it has taken this many requests.")
    var requestsPerConnection: Int?
    @Option(name: .customLong("shutdown-grace-period"), help: "HTTP/3: seconds a connection shutting down gracefully (GOAWAY) gives the requests it has taken to finish before it closes anyway (default 10).")
    var shutdownGracePeriod: Double?

    func validate() throws {
        if stack.isSecure {
            guard let cert, let key else { throw ValidationError("--stack \(stack) needs --cert and --key") }
            _ = try readableFile(cert, flag: "--cert")
            _ = try readableFile(key, flag: "--key")
        } else if cert != nil || key != nil {
            throw ValidationError("--stack \(stack) has no certificates: --cert and --key are for quic, tls, dtls and wss")
        }
        if stack != .quic {
            guard !applications.contains("h3") else { throw ValidationError("--alpn h3 (HTTP/3) runs over --stack quic") }
            if !stack.negotiatesApplication && applications.count != 1 {
                throw ValidationError("--stack \(stack) serves one application: --alpn perf or --alpn echo")
            }
            if !stack.carriesByteStreams && applications != [EchoService.alpn] {
                throw ValidationError("--stack \(stack) carries datagrams only: it serves echo (perf needs a byte stream)")
            }
            guard !retry, qlogDirectory == nil, loops == 1 else { throw ValidationError("--retry, --qlog-dir and --loops are QUIC's") }
            guard fleet.isDefault else { throw ValidationError("--cid-format and --fleet-keys are QUIC's") }
        }
        if applications.contains("h3") {
            guard applications == ["h3"] else { throw ValidationError("--alpn h3 serves HTTP/3 alone; perf and echo need another server") }
            if let root {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw ValidationError("--root \(root): no such directory")
                }
            }
        } else {
            let unknown = applications.filter { $0 != PerfService.alpn && $0 != EchoService.alpn }
            guard unknown.isEmpty, !applications.isEmpty else {
                throw ValidationError("--alpn \(applications.joined(separator: ",")): the applications are perf and echo (or h3 alone)")
            }
            guard root == nil, requestsPerConnection == nil, shutdownGracePeriod == nil else {
                throw ValidationError("--root, --requests-per-connection and --shutdown-grace-period are for --alpn h3")
            }
        }
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1") }
        if let requestsPerConnection, requestsPerConnection < 1 { throw ValidationError("--requests-per-connection must be at least 1") }
        if let shutdownGracePeriod, !(shutdownGracePeriod > 0 && shutdownGracePeriod <= 86_400) {
            throw ValidationError("--shutdown-grace-period must be more than 0 and at most 86400 seconds")
        }
        guard connectionLimit >= 1, halfOpenLimit >= 1, connectionLimitPerAddress >= 0, retryThreshold >= 0 else {
            throw ValidationError("--connection-limit and --half-open-limit must be at least 1, --connection-limit-per-address and --retry-threshold at least 0")
        }
    }

    private var applications: [String] {
        let list = alpn ?? (stack.negotiatesApplication ? "perf,echo" : EchoService.alpn)
        return list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    func run() async throws {
        guard stack == .quic else { return try await runOtherStack() }
        let stack = QUIC(alpn: applications)
            .identity(certificateChainFile: cert ?? "", privateKeyFile: key ?? "")
            .retry(retry)
            .newConnectionLimitPerAddress(connectionLimitPerAddress)
            .automaticRetryThreshold(retryThreshold)
            .halfOpenHandshakeLimit(halfOpenLimit)
            .earlyDataEnabled(true)
            .maxDatagramFrameSize(65535)
            .qlogDirectory(qlogDirectory)
            .serverLoops(loops)
            .batching(batching.options)
            .connectionIDFormat(fleet.connectionIDFormat.format)
        let fleetKeys = try fleet.loadKeys()
        let configured = fleetKeys.map { stack.fleetKeys($0) } ?? stack
        let listener = NetworkListener(for: .hostPort(host: NWEndpoint.Host(host), port: port)) { configured }
        let reloading = fleetKeys.map(FleetKeyReloader.init)
        listener.newConnectionLimit = connectionLimit
        let json = json
        let fileServer = applications == ["h3"] ? HTTP3FileServer(root: root) : nil
        let requestsPerConnection = requestsPerConnection
        let shutdownGracePeriod = Duration.seconds(shutdownGracePeriod ?? 10)
        // The group's graceful shutdown cancels the listener's run, which is the listener's
        // graceful shutdown: it stops accepting, closes every connection with code 0 (HTTP/3:
        // GOAWAY, the requests taken finish, then H3_NO_ERROR), and returns once the closes are
        // on the socket.
        let service: any Service
        if let fileServer {
            service = ServeLifecycle.service {
                try await listener.runHTTP3(requestsPerConnection: requestsPerConnection, shutdownGracePeriod: shutdownGracePeriod, fileServer.handle)
            }
        } else {
            service = NetworkListenerService(listener) { connection in
                let report = await ApplicationServer.serve(connection)
                if json, let report { printJSON(report) }
            }
        }
        let announcer = Task { () -> String? in
            for await state in listener.states {
                if state == .ready {
                    FileHandle.standardOutput.write(Data("listening \(listener.port!)\n".utf8))
                }
                if case .failed(let error) = state { return "\(error)" }
                if state.isFinal { break }
            }
            return nil
        }
        do {
            try await ServeLifecycle.run(service)
        } catch {
            if let failure = await announcer.value { throw CommandFailure("cannot listen on \(host):\(port): \(failure)") }
            throw error
        }
        reloading?.stop()
    }

    /// `run` for the stacks other than QUIC: the same output and shutdown.
    private func runOtherStack() async throws {
        let json = json, stack = stack, host = host, port = port.rawValue, applications = applications
        let identity = cert.flatMap { cert in key.map { ServerIdentity(certificateChainFile: cert, privateKeyFile: $0) } }
        let service = ServeLifecycle.service {
            try await ApplicationServer.run(
                stack: stack, host: host, port: port, applications: applications, identity: identity,
                listening: { FileHandle.standardOutput.write(Data("listening \($0)\n".utf8)) },
                report: { if json { printJSON($0) } })
        }
        do {
            try await ServeLifecycle.run(service)
        } catch {
            throw CommandFailure("cannot serve \(stack) on \(host):\(port): \(error)")
        }
    }
}
