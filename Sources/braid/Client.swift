import ArgumentParser
import Braid
import BraidPerf
import BraidQUIC
import Foundation

/// `braid client`: runs the perf or echo application against a server and checks every byte.
struct Client: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download, upload or echo over QUIC (or --stack) and check every byte.",
        discussion: """
            perf: each of --streams streams asks for --download bytes and sends --upload bytes. \
            echo: each of --streams streams sends --bytes bytes and checks the echo; then \
            --datagrams datagrams of --datagram-size bytes are sent and their echoes checked. \
            Exit status 0 only if everything arrived intact.

            --stack tls, tcp, ws and wss carry one stream per connection (--streams N opens N \
            connections); ws and wss carry datagrams as binary messages; udp and dtls carry \
            datagrams only (echo, --datagrams; --streams is ignored). Key updates, migration and \
            session files are QUIC's.
            """)

    @Option(help: "Stack: \(ApplicationStack.names).") var stack: ApplicationStack = .quic
    @Option(help: "Server name or IP address.") var host: String
    @Option(help: "Server port (UDP for quic, udp and dtls; TCP for the others).") var port: NWEndpoint.Port
    @Option(help: "Application: perf or echo.") var alpn: String
    @Option(help: "perf: bytes to download per stream.") var download = 0
    @Option(help: "perf: bytes to upload per stream.") var upload = 0
    @Option(help: "Concurrent streams (stacks other than quic: one connection each).") var streams = 1
    @Option(help: "echo: bytes to echo per stream.") var bytes = 0
    @Option(help: "echo: datagrams to echo.") var datagrams = 0
    @Option(name: .customLong("datagram-size"), help: "echo: bytes per datagram (at least 4).") var datagramSize = 1000
    @Option(help: "echo: datagrams awaiting their echo at most (default 512; dtls 32, below its receive queue of 64).") var window: Int?
    @Option(help: "Trust the CA certificates in this PEM file (default: the system's).") var ca: String?
    @Flag(help: "Accept any server certificate (testing only).") var insecure = false
    @Option(help: "Server name for SNI and certificate checks (default: --host).") var sni: String?
    @Option(name: .customLong("session-file"), help: "Resume with, and store, session tickets in this file; the request goes in 0-RTT when a ticket is there.")
    var sessionFile: String?
    @Flag(name: .customLong("key-update"), help: "Update the packet keys halfway through the transfer.") var keyUpdate = false
    @Flag(help: "Move to a new local port halfway through the transfer.") var migrate = false
    @Flag(name: .customLong("verify-pattern"), help: "perf: check every downloaded byte against Braid's pattern (other perf servers send zeros; by default bytes are only counted and timed).")
    var verifyPattern = false
    @Option(name: .customLong("close-code"), help: "Close with this application error code when done.") var closeCode: UInt64 = 0
    @Option(name: .customLong("close-reason"), help: "Reason sent with the close.") var closeReason = ""
    @Option(help: "Give up after this many seconds.") var timeout = 30.0
    @Option(name: .customLong("handshake-timeout"), help: "Seconds to wait for the server's handshake.") var handshakeTimeout = 10.0
    @Option(name: .customLong("cc"), help: "Congestion control: cubic, reno or bbr.") var congestionControl = "cubic"
    @OptionGroup var batching: BatchingFlags
    @Flag(help: "Print one JSON object with the results.") var json = false
    @Flag(name: .shortAndLong, help: "No progress line (it is drawn on standard error only when that is a terminal).") var quiet = false

    func validate() throws {
        guard alpn == PerfService.alpn || alpn == EchoService.alpn else { throw ValidationError("--alpn must be perf or echo") }
        if let ca { _ = try readableFile(ca, flag: "--ca") }
        if ca != nil && insecure { throw ValidationError("--ca and --insecure exclude each other") }
        guard streams >= 0, download >= 0, upload >= 0, bytes >= 0, datagrams >= 0 else {
            throw ValidationError("counts and sizes cannot be negative")
        }
        if let window, window < 2 { throw ValidationError("--window must be at least 2") }
        guard datagrams == 0 || datagramSize >= 4 else { throw ValidationError("--datagram-size must be at least 4") }
        guard CongestionControl(rawValue: congestionControl) != nil else { throw ValidationError("--cc must be cubic, reno or bbr") }
        guard timeout > 0, handshakeTimeout > 0 else { throw ValidationError("timeouts must be positive") }
        if stack != .quic {
            guard !keyUpdate, !migrate, sessionFile == nil else {
                throw ValidationError("--key-update, --migrate and --session-file are QUIC's (--stack quic)")
            }
            if !stack.carriesByteStreams && (alpn == PerfService.alpn || (streams > 0 && bytes > 0)) {
                throw ValidationError("--stack \(stack) carries datagrams only: use --alpn echo --streams 0 --datagrams N (perf and --bytes need a byte stream)")
            }
            if !stack.carriesMessages && datagrams > 0 {
                throw ValidationError("--stack \(stack) carries no datagrams: --datagrams needs quic, udp, dtls, ws or wss")
            }
        }
    }

    func run() async throws {
        let transport: any ApplicationTransport
        if stack == .quic {
            transport = QUICTransport(try quicConnection())
        } else {
            let trust = ClientTrust(certificateAuthorities: ca, insecure: insecure, serverName: sni ?? host)
            transport = try ApplicationClient.transport(stack: stack, host: host, port: port.rawValue, application: alpn, trust: trust)
        }
        var options = ApplicationClient.Options(alpn: alpn)
        options.streams = stack.carriesByteStreams ? streams : 0
        options.download = download
        options.upload = upload
        options.bytes = bytes
        options.datagrams = datagrams
        options.datagramSize = datagramSize
        options.datagramWindow = window ?? stack.datagramWindow
        options.keyUpdate = keyUpdate
        options.migrate = migrate
        options.verifyPattern = verifyPattern
        let progress = ProgressDisplay(quiet: quiet)
        options.progress = progress
        let run = ApplicationClient(options: options, transport: transport)
        progress.start(total: run.progressTotal)
        let outcome = await CommandFailure.outcome(of: { try await run.perform() }, within: timeout, what: "run")
        await progress.finish()
        switch outcome {
        case .success(let report):
            await transport.close(applicationErrorCode: closeCode, reason: closeReason)
            if json {
                var object = report.json
                object["stack"] = stack.rawValue
                printJSON(object)
            } else {
                print(report.summary)
            }
            if !report.ok { throw ExitCode(2) }
        case .failure(let error):
            await transport.close(applicationErrorCode: 0, reason: "")
            throw CommandFailure("\(error)")
        }
    }

    /// The QUIC connection the options describe.
    private func quicConnection() throws -> NetworkConnection<QUIC> {
        var stack = QUIC(alpn: [alpn])
            .serverName(sni ?? host)
            .maxDatagramFrameSize(65535)
            .handshakeTimeout(.milliseconds(Int(handshakeTimeout * 1000)))
            .congestionControl(CongestionControl(rawValue: congestionControl)!)
            .batching(batching.options)
        if let ca { stack = stack.trust(.certificateAuthorities(file: ca)) }
        if insecure { stack = stack.insecureAcceptAnyCertificate() }
        if let sessionFile { stack = stack.sessionCache(try CommandFailure.sessionCache(file: sessionFile)) }
        return NetworkConnection(to: .hostPort(host: NWEndpoint.Host(host), port: port)) { stack }
    }
}
