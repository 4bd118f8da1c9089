import Braid
import BraidCore
import Foundation

extension Result where Failure == any Error {
    /// The outcome of an async throwing call.
    package init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// One client run of the perf or echo application over a connection: the transfer, the
/// checks on every byte, and the numbers. The `braid` tool and the benchmarks use it.
package struct ApplicationClient: Sendable {
    /// What to transfer.
    package struct Options: Sendable {
        /// "perf" or "echo".
        package var alpn: String
        package var streams = 1
        /// perf: bytes to download and to upload per stream.
        package var download = 0
        package var upload = 0
        /// echo: bytes per stream, and datagrams of `datagramSize` bytes (at least 4).
        package var bytes = 0
        package var datagrams = 0
        package var datagramSize = 1000
        /// echo: datagrams awaiting their echo at most (`ApplicationClient.datagramWindow`, or
        /// `ApplicationStack.datagramWindow` for a stack with a smaller receive queue).
        package var datagramWindow = ApplicationClient.datagramWindow
        /// Update keys and/or migrate once half the expected bytes are in.
        package var keyUpdate = false
        package var migrate = false
        /// perf: check every downloaded byte against Braid's pattern. Off by default: the perf
        /// draft does not define the response bytes, and other perf servers send zeros, so by
        /// default the client counts and times the bytes only.
        package var verifyPattern = false
        /// Where the run counts the bytes it moves (stream bytes both ways, echoed datagrams'
        /// bytes), for a progress line; nil: not counted.
        package var progress: ProgressDisplay?

        package init(alpn: String) { self.alpn = alpn }
    }

    let options: Options
    let transport: any ApplicationTransport

    /// A run over one QUIC connection.
    package init(options: Options, connection: NetworkConnection<QUIC>) {
        self.init(options: options, transport: QUICTransport(connection))
    }

    /// A run over any stack's transport.
    package init(options: Options, transport: any ApplicationTransport) {
        self.options = options
        self.transport = transport
    }

    package struct Report: Sendable {
        package var handshakeMilliseconds = 0.0
        package var seconds = 0.0
        package var bytesSent = 0
        package var bytesReceived = 0
        package var streamsOK = 0
        package var streamsFailed = 0
        package var datagramsSent = 0
        package var datagramsReceived = 0
        package var earlyData = false
        package var keyUpdated = false
        package var migrated = false
        package var alpn = ""
        package var failures: [String] = []
        package var statistics: NetworkConnectionStatistics?
        package var ok: Bool { failures.isEmpty }

        /// The report as the `--json` output of `braid client`.
        package var json: [String: Any] {
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

        /// A few human-readable lines.
        package var summary: String {
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
        options.alpn == PerfService.alpn ? options.streams * options.download : options.streams * options.bytes
    }

    /// The bytes `options.progress` counts by the end of a run that goes as planned.
    package var progressTotal: Int {
        let streams = options.alpn == PerfService.alpn ? options.streams * (options.download + options.upload) : options.streams * options.bytes * 2
        return streams + options.datagrams * options.datagramSize
    }

    /// Runs the transfer; throws if the connection fails (a stream's own failure is reported).
    package func perform() async throws -> Report {
        let start = ContinuousClock.now
        let readyAt = transport.readyInstant()
        transport.start()
        let progress = Progress(threshold: expectedBytes / 2, display: options.progress)
        let midpoint = Task { await midpointActions(progress) }
        var report = Report(alpn: options.alpn)
        let outcomes = try await withThrowingTaskGroup(of: StreamOutcome.self) { group in
            for index in 0..<options.streams {
                group.addTask {
                    do {
                        return try await options.alpn == PerfService.alpn ? perfStream(index, progress) : echoStream(index, progress)
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
        if options.datagrams > 0 {
            let (sent, echoed) = try await echoDatagrams()
            report.datagramsSent = sent
            report.datagramsReceived = echoed
            report.bytesSent += sent * options.datagramSize
            report.bytesReceived += echoed * options.datagramSize
            if echoed < options.datagrams { report.failures.append("\(options.datagrams - echoed) datagrams never came back intact") }
        }
        // A run with nothing to send is a handshake check.
        if options.streams == 0 && options.datagrams == 0 {
            guard await transport.becomesReady() else {
                throw ApplicationFailure("the connection ended before it was ready: \(transport.stateDescription)")
            }
        }
        report.seconds = (ContinuousClock.now - start).seconds
        progress.finish()
        let (keyUpdated, migrated) = await midpoint.value
        report.keyUpdated = keyUpdated
        report.migrated = migrated
        if options.keyUpdate && !keyUpdated { report.failures.append("the key update did not happen") }
        if options.migrate && !migrated { report.failures.append("the migration did not happen") }
        if let ready = await readyAt.value { report.handshakeMilliseconds = (ready - start).milliseconds }
        report.earlyData = transport.earlyDataAccepted
        report.statistics = await transport.statistics
        return report
    }

    /// Waits until half the expected bytes are in, then updates keys and/or migrates.
    private func midpointActions(_ progress: Progress) async -> (Bool, Bool) {
        guard options.keyUpdate || options.migrate else { return (false, false) }
        await progress.halfway()
        var keyUpdated = false, migrated = false
        if options.keyUpdate { keyUpdated = (try? await transport.updateKeys()) != nil }
        if options.migrate { migrated = (try? await transport.migrate()) != nil }
        return (keyUpdated, migrated)
    }

    struct StreamOutcome: Sendable {
        var sent = 0
        var received = 0
        var failure: String?
    }

    private func perfStream(_ index: Int, _ progress: Progress) async throws -> StreamOutcome {
        let stream = try await transport.openChannel(index)
        // The request may go in 0-RTT: asking for bytes is idempotent. The upload is not.
        let request = withUnsafeBytes(of: UInt64(options.download).bigEndian) { Data($0) }
        try await stream.sendIdempotent(request, endOfStream: options.upload == 0)
        var outcome = StreamOutcome()
        if options.upload > 0 {
            try await PerfService.sendPattern(count: options.upload, on: stream, onBytes: { options.progress?.add($0) })
            outcome.sent = options.upload
        }
        let download = try await PerfService.receivePattern(from: stream, verify: options.verifyPattern, onBytes: progress.add)
        outcome.received = download.count
        if !download.intact {
            outcome.failure = "perf stream \(index): a downloaded byte differs from the pattern"
        } else if outcome.received != options.download {
            outcome.failure = "perf stream \(index): \(outcome.received) of \(options.download) bytes arrived"
        }
        return outcome
    }

    private func echoStream(_ index: Int, _ progress: Progress) async throws -> StreamOutcome {
        let stream = try await transport.openChannel(index)
        let total = options.bytes
        let display = options.progress
        let sender = Task { try await PerfService.sendPattern(count: total, on: stream, onBytes: { display?.add($0) }) }
        var outcome = StreamOutcome(sent: total)
        do {
            let echo = try await PerfService.receivePattern(from: stream, onBytes: progress.add)
            outcome.received = echo.count
            if !echo.intact { outcome.failure = "echo stream \(index): an echoed byte differs from what was sent" }
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

    /// Echo datagrams the client keeps outstanding: enough to keep the path busy, few enough
    /// that neither end's receive queue overflows (a flood without any window measures
    /// mostly drops and resends).
    package static let datagramWindow = 512

    /// Sends every datagram (a sequence number, then pattern bytes) keeping at most
    /// `datagramWindow` unanswered, resends those whose echo has not come back after a while
    /// (datagrams may be lost; over a reliable channel nothing is resent), and counts intact
    /// echoes.
    private func echoDatagrams() async throws -> (sent: Int, echoed: Int) {
        let count = options.datagrams, size = options.datagramSize
        guard await transport.becomesReady() else { throw ApplicationFailure("the connection ended: \(transport.stateDescription)") }
        let channel = try transport.messageChannel()
        if let usable = channel.usableMessageSize, size > usable {
            throw ApplicationFailure("\(size)-byte datagrams do not fit this connection's packets (at most \(usable) bytes)")
        }
        let tally = EchoTally(count: count, onEcho: { [display = options.progress] in display?.add(size) })
        let receiver = Task {
            defer { tally.receiverEnded() }
            try await channel.receiveMessages { reply in
                guard let number = EchoDatagram.number(ofEcho: reply, size: size, count: count) else { return true }
                return !tally.record(number)
            }
        }
        defer { receiver.cancel() }
        let window = max(2, options.datagramWindow)
        if channel.isReliable {
            // Nothing is lost, so nothing is sent twice (a second copy's echo would still be on
            // its way when the run ends): every echo is waited for while the messages come in.
            func waitUntilEchoed(_ target: Int) async throws {
                while tally.count < target {
                    try Task.checkCancellation()
                    if await !tally.wait(untilEchoed: target, timeout: .seconds(1)) && tally.hasReceiverEnded { return }
                }
            }
            for number in 0..<count {
                if number >= window { try await waitUntilEchoed(number - window + 1) }
                try await channel.sendMessage(EchoDatagram.make(number: number, size: size))
            }
            try await waitUntilEchoed(count)
            return (count, tally.count)
        }
        for round in 0..<5 {
            let missing = tally.missing()
            if missing.isEmpty { break }
            let echoedBefore = tally.count
            // Datagrams of this round presumed lost: their echo is no longer waited for.
            var writtenOff = 0
            for (index, number) in missing.enumerated() {
                while index - (tally.count - echoedBefore) - writtenOff >= window {
                    let target = index - writtenOff - window / 2 + echoedBefore
                    if !(await tally.wait(untilEchoed: target, timeout: .milliseconds(50))) { writtenOff += window / 2 }
                }
                try await channel.sendMessage(EchoDatagram.make(number: number, size: size))
            }
            // Wait for the last echoes, longer each round.
            _ = await tally.wait(untilEchoed: count, timeout: .milliseconds(200 << round))
        }
        return (count, tally.count)
    }
}

/// Which echo datagrams came back, and a wait for the count to reach a mark.
final class EchoTally: Sendable {
    private struct State {
        var echoed: [Bool]
        var count = 0
        var waiter: (id: Int, target: Int, continuation: CheckedContinuation<Bool, Never>)?
        var nextWaiterID = 0
        var receiverEnded = false
    }
    private let state: Locked<State>

    /// Hears each datagram's first echo.
    private let onEcho: @Sendable () -> Void

    init(count: Int, onEcho: @escaping @Sendable () -> Void = {}) {
        state = Locked(State(echoed: Array(repeating: false, count: count)))
        self.onEcho = onEcho
    }

    var count: Int { state.withLock { $0.count } }

    /// The echoes have stopped coming: the connection ended.
    func receiverEnded() { state.withLock { $0.receiverEnded = true } }
    var hasReceiverEnded: Bool { state.withLock { $0.receiverEnded } }

    /// Notes an echo; true once every datagram has come back.
    func record(_ number: Int) -> Bool {
        let (done, woken, first) = state.withLock { state -> (Bool, CheckedContinuation<Bool, Never>?, Bool) in
            let first = !state.echoed[number]
            if first {
                state.echoed[number] = true
                state.count += 1
            }
            var woken: CheckedContinuation<Bool, Never>?
            if let waiter = state.waiter, state.count >= waiter.target {
                woken = waiter.continuation
                state.waiter = nil
            }
            return (state.count == state.echoed.count, woken, first)
        }
        if first { onEcho() }
        woken?.resume(returning: true)
        return done
    }

    func missing() -> [Int] {
        state.withLock { state in state.echoed.indices.filter { !state.echoed[$0] } }
    }

    /// Waits (one waiter at a time) until `target` echoes are in; false after `timeout`.
    func wait(untilEchoed target: Int, timeout: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let id = state.withLock { state -> Int? in
                if state.count >= target { return nil }
                precondition(state.waiter == nil, "EchoTally.wait is for one waiting task at a time")
                state.nextWaiterID += 1
                state.waiter = (state.nextWaiterID, target, continuation)
                return state.nextWaiterID
            }
            guard let id else { return continuation.resume(returning: true) }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = self.state.withLock { state -> CheckedContinuation<Bool, Never>? in
                    guard let waiter = state.waiter, waiter.id == id else { return nil }
                    state.waiter = nil
                    return waiter.continuation
                }
                expired?.resume(returning: false)
            }
        }
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
    private let state = Locked(State())
    private let display: ProgressDisplay?

    init(threshold: Int, display: ProgressDisplay? = nil) {
        self.threshold = threshold
        self.display = display
    }

    func add(_ count: Int) {
        display?.add(count)
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

extension NetworkConnectionStatistics {
    /// The statistics as JSON values (durations in milliseconds).
    package var json: [String: Any] {
        [
            "smoothed_rtt_ms": smoothedRTT.milliseconds, "min_rtt_ms": minimumRTT.milliseconds,
            "latest_rtt_ms": latestRTT.milliseconds, "cwnd": congestionWindow, "bytes_in_flight": bytesInFlight,
            "packets_sent": packetsSent, "bytes_sent": bytesSent, "packets_received": packetsReceived,
            "bytes_received": bytesReceived, "datagrams_lost": datagramsLost,
            "syscalls": ["sendmsg": sendmsgCalls, "sendmmsg": sendmmsgCalls, "recvmsg": recvmsgCalls, "recvmmsg": recvmmsgCalls],
        ]
    }
}

extension Duration {
    package var nanoseconds: UInt64 { UInt64(max(0, components.seconds)) * 1_000_000_000 + UInt64(max(0, components.attoseconds) / 1_000_000_000) }
    package var milliseconds: Double { Double(components.seconds) * 1e3 + Double(components.attoseconds) / 1e15 }
    package var seconds: Double { milliseconds / 1e3 }
}

/// When `connection` becomes ready: nil if it ends first. Call it before the connection
/// starts; the states are watched from this moment, so `ready` is never missed.
package func readyInstant<Stack: NetworkProtocol>(of connection: NetworkConnection<Stack>) -> Task<ContinuousClock.Instant?, Never> {
    let states = connection.states
    return Task {
        for await state in states where state == .ready { return ContinuousClock.now }
        return nil
    }
}

/// Starts `connection` if it has not started and waits until it is ready; returns false if
/// it ended first.
package func becomesReady<Stack: NetworkProtocol>(_ connection: NetworkConnection<Stack>) async -> Bool {
    connection.start()
    for await state in connection.states {
        if state == .ready { return true }
        if state.isFinal { return false }
    }
    return false
}

/// A failure with a message meant for people.
package struct ApplicationFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Prints a JSON object on one line to standard output (keys sorted).
package func printJSON(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}
