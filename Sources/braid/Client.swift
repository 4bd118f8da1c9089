import ArgumentParser
import Braid
import BraidPerf
import Foundation
import Synchronization

/// `braid client`: runs the perf or echo application against a server and checks every byte.
struct Client: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download, upload or echo over QUIC and check every byte.",
        discussion: """
            perf: each of --streams streams asks for --download bytes and sends --upload bytes. \
            echo: each of --streams streams sends --bytes bytes and checks the echo; then \
            --datagrams datagrams of --datagram-size bytes are sent and their echoes checked. \
            Exit status 0 only if everything arrived intact.
            """)

    @Option(help: "Server name or IP address.") var host: String
    @Option(help: "Server UDP port.") var port: NWEndpoint.Port
    @Option(help: "Application: perf or echo.") var alpn: String
    @Option(help: "perf: bytes to download per stream.") var download = 0
    @Option(help: "perf: bytes to upload per stream.") var upload = 0
    @Option(help: "Concurrent streams.") var streams = 1
    @Option(help: "echo: bytes to echo per stream.") var bytes = 0
    @Option(help: "echo: datagrams to echo.") var datagrams = 0
    @Option(name: .customLong("datagram-size"), help: "echo: bytes per datagram (at least 4).") var datagramSize = 1000
    @Option(help: "Trust the CA certificates in this PEM file (default: the system's).") var ca: String?
    @Flag(help: "Accept any server certificate (testing only).") var insecure = false
    @Option(help: "Server name for SNI and certificate checks (default: --host).") var sni: String?
    @Option(name: .customLong("session-file"), help: "Resume with, and store, session tickets in this file; the request goes in 0-RTT when a ticket is there.")
    var sessionFile: String?
    @Flag(name: .customLong("key-update"), help: "Update the packet keys halfway through the transfer.") var keyUpdate = false
    @Flag(help: "Move to a new local port halfway through the transfer.") var migrate = false
    @Option(name: .customLong("close-code"), help: "Close with this application error code when done.") var closeCode: UInt64 = 0
    @Option(name: .customLong("close-reason"), help: "Reason sent with the close.") var closeReason = ""
    @Option(help: "Give up after this many seconds.") var timeout = 30.0
    @Option(name: .customLong("handshake-timeout"), help: "Seconds to wait for the server's handshake.") var handshakeTimeout = 10.0
    @Option(name: .customLong("cc"), help: "Congestion control: cubic, reno or bbr.") var congestionControl = "cubic"
    @OptionGroup var batching: BatchingFlags
    @Flag(help: "Print one JSON object with the results.") var json = false

    func validate() throws {
        guard alpn == PerfService.alpn || alpn == EchoService.alpn else { throw ValidationError("--alpn must be perf or echo") }
        if let ca { _ = try readableFile(ca, flag: "--ca") }
        if ca != nil && insecure { throw ValidationError("--ca and --insecure exclude each other") }
        guard streams >= 0, download >= 0, upload >= 0, bytes >= 0, datagrams >= 0 else {
            throw ValidationError("counts and sizes cannot be negative")
        }
        guard datagrams == 0 || datagramSize >= 4 else { throw ValidationError("--datagram-size must be at least 4") }
        guard CongestionControl(rawValue: congestionControl) != nil else { throw ValidationError("--cc must be cubic, reno or bbr") }
        guard timeout > 0, handshakeTimeout > 0 else { throw ValidationError("timeouts must be positive") }
    }

    func run() async throws {
        var stack = QUIC(alpn: [alpn])
            .serverName(sni ?? host)
            .maxDatagramFrameSize(65535)
            .handshakeTimeout(.milliseconds(Int(handshakeTimeout * 1000)))
            .congestionControl(CongestionControl(rawValue: congestionControl)!)
            .batching(batching.options)
        if let ca { stack = stack.trust(.certificateAuthorities(file: ca)) }
        if insecure { stack = stack.insecureAcceptAnyCertificate() }
        if let sessionFile {
            do {
                stack = stack.sessionCache(try QUIC.SessionCache(file: sessionFile))
            } catch {
                throw CommandFailure("--session-file \(sessionFile): \(error)")
            }
        }
        let connection = NetworkConnection(to: .hostPort(host: NWEndpoint.Host(host), port: port)) { stack }
        let run = ClientRun(command: self, connection: connection)
        let outcome = await withTaskGroup(of: Result<ClientRun.Report, any Error>?.self) { group in
            group.addTask { await Result { try await run.perform() } }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
                return Task.isCancelled ? nil : .failure(CommandFailure("timed out after \(timeout) s"))
            }
            let first = await group.next()!!
            group.cancelAll()
            return first
        }
        switch outcome {
        case .success(let report):
            connection.cancel(applicationErrorCode: closeCode, reason: closeReason)
            if json { printJSON(report.json) } else { print(report.summary) }
            // Give the close a moment to leave before the process exits.
            try? await Task.sleep(for: .milliseconds(50))
            if !report.ok { throw ExitCode(2) }
        case .failure(let error):
            connection.cancel()
            throw CommandFailure("\(error)")
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// One client run: the transfer, the checks and the numbers.
struct ClientRun: Sendable {
    let command: Client
    let connection: NetworkConnection<QUIC>

    struct Report: Sendable {
        var handshakeMilliseconds = 0.0
        var seconds = 0.0
        var bytesSent = 0
        var bytesReceived = 0
        var streamsOK = 0
        var streamsFailed = 0
        var datagramsSent = 0
        var datagramsReceived = 0
        var earlyData = false
        var keyUpdated = false
        var migrated = false
        var alpn = ""
        var failures: [String] = []
        var statistics: NetworkConnectionStatistics?
        var ok: Bool { failures.isEmpty }

        var json: [String: Any] {
            var object: [String: Any] = [
                "handshake_ms": handshakeMilliseconds, "seconds": seconds, "bytes_sent": bytesSent,
                "bytes_received": bytesReceived, "goodput_gbit_s": seconds > 0 ? Double(bytesSent + bytesReceived) * 8 / seconds / 1e9 : 0,
                "streams_ok": streamsOK, "streams_failed": streamsFailed, "datagrams_sent": datagramsSent,
                "datagrams_received": datagramsReceived, "early_data": earlyData, "key_update": keyUpdated,
                "migrated": migrated, "alpn": alpn, "ok": ok, "failures": failures,
            ]
            object["statistics"] = statistics?.json
            return object
        }

        var summary: String {
            let goodput = seconds > 0 ? Double(bytesSent + bytesReceived) * 8 / seconds / 1e9 : 0
            var lines = [
                "\(alpn): \(ok ? "ok" : "FAILED") in \(String(format: "%.3f", seconds)) s, handshake \(String(format: "%.2f", handshakeMilliseconds)) ms\(earlyData ? ", 0-RTT accepted" : "")",
                "  sent \(bytesSent) B, received \(bytesReceived) B, \(String(format: "%.3f", goodput)) Gbit/s; streams ok \(streamsOK)/\(streamsOK + streamsFailed)",
            ]
            if datagramsSent > 0 { lines.append("  datagrams echoed \(datagramsReceived)/\(datagramsSent)") }
            lines += failures.map { "  failure: \($0)" }
            return lines.joined(separator: "\n")
        }
    }

    /// Total payload bytes the run expects back; key update and migration happen at half.
    private var expectedBytes: Int {
        command.alpn == PerfService.alpn ? command.streams * command.download : command.streams * command.bytes
    }

    func perform() async throws -> Report {
        let clock = ContinuousClock()
        let start = clock.now
        let states = connection.states
        let readyAt = Task { () -> ContinuousClock.Instant? in
            for await state in states where state == .ready { return clock.now }
            return nil
        }
        connection.start()
        let progress = Progress(threshold: expectedBytes / 2)
        let midpoint = Task { await midpointActions(progress) }
        var report = Report(alpn: command.alpn)
        let outcomes = try await withThrowingTaskGroup(of: StreamOutcome.self) { group in
            for index in 0..<command.streams {
                group.addTask {
                    do {
                        return try await command.alpn == PerfService.alpn ? perfStream(progress) : echoStream(index, progress)
                    } catch let error as NetworkError {
                        // The connection itself failing ends the run; a stream's own failure is counted.
                        switch error {
                        case .streamReset, .streamStopped, .unexpectedEndOfStream: return StreamOutcome(failure: "stream \(index): \(error)")
                        default: throw error
                        }
                    }
                }
            }
            return try await group.reduce(into: [StreamOutcome]()) { $0.append($1) }
        }
        for outcome in outcomes {
            report.bytesSent += outcome.sent
            report.bytesReceived += outcome.received
            if let failure = outcome.failure {
                report.streamsFailed += 1
                report.failures.append(failure)
            } else {
                report.streamsOK += 1
            }
        }
        if command.datagrams > 0 {
            let (sent, echoed) = try await echoDatagrams()
            report.datagramsSent = sent
            report.datagramsReceived = echoed
            report.bytesSent += sent * command.datagramSize
            report.bytesReceived += echoed * command.datagramSize
            if echoed < command.datagrams { report.failures.append("\(command.datagrams - echoed) datagrams never came back intact") }
        }
        // A run with nothing to send is a handshake check.
        if command.streams == 0 && command.datagrams == 0 {
            guard await becomesReady(connection) else {
                throw CommandFailure("the connection ended before it was ready: \(connection.state)")
            }
        }
        report.seconds = (clock.now - start).seconds
        progress.finish()
        let (keyUpdated, migrated) = await midpoint.value
        report.keyUpdated = keyUpdated
        report.migrated = migrated
        if command.keyUpdate && !keyUpdated { report.failures.append("the key update did not happen") }
        if command.migrate && !migrated { report.failures.append("the migration did not happen") }
        if let ready = await readyAtValue(readyAt) { report.handshakeMilliseconds = (ready - start).milliseconds }
        report.earlyData = connection.earlyDataAccepted
        report.statistics = await connection.statistics
        return report
    }

    private func readyAtValue(_ task: Task<ContinuousClock.Instant?, Never>) async -> ContinuousClock.Instant? {
        if connection.state == .ready || connection.state.isFinal { task.cancel() }
        return await task.value
    }

    /// Waits until half the expected bytes are in, then updates keys and/or migrates.
    private func midpointActions(_ progress: Progress) async -> (Bool, Bool) {
        guard command.keyUpdate || command.migrate else { return (false, false) }
        await progress.halfway()
        var keyUpdated = false, migrated = false
        if command.keyUpdate { keyUpdated = (try? await connection.updateKeys()) != nil }
        if command.migrate { migrated = (try? await connection.migrate()) != nil }
        return (keyUpdated, migrated)
    }

    struct StreamOutcome: Sendable {
        var sent = 0
        var received = 0
        var failure: String?
    }

    private func perfStream(_ progress: Progress) async throws -> StreamOutcome {
        let stream = try await connection.openStream()
        // The request may go in 0-RTT: asking for bytes is idempotent. The upload is not.
        let request = withUnsafeBytes(of: UInt64(command.download).bigEndian) { Data($0) }
        try await stream.sendIdempotent(request, endOfStream: command.upload == 0)
        var outcome = StreamOutcome()
        if command.upload > 0 {
            var sent = 0
            while sent < command.upload {
                let piece = min(65536, command.upload - sent)
                try await stream.send(PerfPattern.slice(at: sent, count: piece), endOfStream: sent + piece == command.upload)
                sent += piece
            }
            outcome.sent = sent
        }
        while true {
            let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1 << 20)
            if !PerfPattern.matches(content, at: outcome.received) {
                outcome.failure = "perf stream \(stream.streamID): a downloaded byte differs from the pattern"
            }
            outcome.received += content.count
            progress.add(content.count)
            if metadata.isEndOfStream { break }
        }
        if outcome.received != command.download, outcome.failure == nil {
            outcome.failure = "perf stream \(stream.streamID): \(outcome.received) of \(command.download) bytes arrived"
        }
        return outcome
    }

    private func echoStream(_ index: Int, _ progress: Progress) async throws -> StreamOutcome {
        let stream = try await connection.openStream()
        let total = command.bytes
        let sender = Task {
            var sent = 0
            repeat {
                let piece = min(65536, total - sent)
                try await stream.send(PerfPattern.slice(at: sent, count: piece), endOfStream: sent + piece == total)
                sent += piece
            } while sent < total
        }
        var outcome = StreamOutcome(sent: total)
        do {
            while true {
                let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1 << 20)
                if !PerfPattern.matches(content, at: outcome.received) {
                    outcome.failure = "echo stream \(index): an echoed byte differs from what was sent"
                }
                outcome.received += content.count
                progress.add(content.count)
                if metadata.isEndOfStream { break }
            }
            try await sender.value
        } catch {
            sender.cancel()
            throw error
        }
        if outcome.received != total, outcome.failure == nil {
            outcome.failure = "echo stream \(index): \(outcome.received) of \(total) bytes came back"
        }
        return outcome
    }

    /// Sends every datagram (a sequence number, then pattern bytes), resends those whose echo
    /// has not come back after a while (datagrams may be lost), and counts intact echoes.
    private func echoDatagrams() async throws -> (sent: Int, echoed: Int) {
        let count = command.datagrams, size = command.datagramSize
        func datagram(_ number: Int) -> Data {
            var bytes = withUnsafeBytes(of: UInt32(number).bigEndian) { Data($0) }
            bytes.append(contentsOf: PerfPattern.slice(at: number, count: size - 4))
            return bytes
        }
        let echoed = Mutex(Set<Int>())
        let receiver = Task {
            for await reply in connection.datagrams {
                guard reply.count == size else { continue }
                let number = reply.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                guard number < count, reply == datagram(number) else { continue }
                let done = echoed.withLock { $0.insert(number); return $0.count == count }
                if done { return }
            }
        }
        defer { receiver.cancel() }
        for round in 0..<5 {
            let missing = (0..<count).filter { number in !echoed.withLock { $0.contains(number) } }
            if missing.isEmpty { break }
            for number in missing { try await connection.datagrams.send(datagram(number)) }
            // Wait for echoes, longer each round.
            for _ in 0..<(20 << round) {
                if echoed.withLock({ $0.count }) == count { break }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        return (count, echoed.withLock { $0.count })
    }
}

/// Received-byte progress, to act once half the expected bytes are in.
final class Progress: Sendable {
    private struct State {
        var received = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var done = false
    }
    private let threshold: Int
    private let state = Mutex(State())

    init(threshold: Int) { self.threshold = threshold }

    func add(_ count: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.received += count
            guard state.received >= threshold else { return [] }
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in ready { waiter.resume() }
    }

    /// The run is over: release anyone still waiting for the halfway mark.
    func finish() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiting { waiter.resume() }
    }

    func halfway() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.received >= threshold || state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
