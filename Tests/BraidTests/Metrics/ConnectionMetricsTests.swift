import Braid
import BraidCore
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing

/// Braid's swift-metrics reports, read from MetricsTestKit's `TestMetrics` for real
/// connections over loopback. Each test reports into a factory of its own (`BraidMetrics.factory`,
/// task-local), so tests running side by side do not count each other's connections.
@Suite(.timeLimit(.minutes(10))) struct ConnectionMetricsTests {
    /// Sums every counter named `label` whose dimensions include all of `dimensions`.
    static func total(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)]) -> Int64 {
        metrics.counters(label: label).filter { counter in
            dimensions.allSatisfy { wanted in counter.dimensions.contains { $0 == wanted } }
        }.reduce(0) { $0 + $1.totalValue }
    }

    /// Waits (generously) until `condition` holds, then checks it once more for the record.
    static func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(condition(), "\(what) did not happen within 60 seconds")
    }

    static let payload = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    @Test func tcpCountsEveryByteBothWaysOnBothSides() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let server = try await RunningStreamListener.start(TCP(), configure: { $0.metricsLabel = "tcp-echo" })
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { TCP() }
            try await connection.send(Self.payload, endOfStream: true)
            let echoed = try await connection.receive(exactly: Self.payload.count).content
            #expect(echoed == Self.payload)
            await connection.close()
            let serverSide = [("stack", "tcp"), ("role", "server"), ("listener", "tcp-echo")]
            let clientSide = [("stack", "tcp"), ("role", "client"), ("listener", "")]
            try await Self.eventually("the server's close and traffic report") {
                Self.total(metrics, "braid_connections_closed_total", serverSide) == 1
                    && Self.total(metrics, "braid_bytes_received_total", serverSide) > 0
                    && Self.total(metrics, "braid_bytes_received_total", clientSide) > 0
            }
            let n = Int64(Self.payload.count)
            #expect(Self.total(metrics, "braid_connections_opened_total", serverSide) == 1)
            #expect(Self.total(metrics, "braid_connections_opened_total", clientSide) == 1)
            #expect(Self.total(metrics, "braid_bytes_received_total", serverSide) == n)
            #expect(Self.total(metrics, "braid_bytes_sent_total", serverSide) == n)
            #expect(Self.total(metrics, "braid_bytes_sent_total", clientSide) == n)
            #expect(Self.total(metrics, "braid_bytes_received_total", clientSide) == n)
            // TCP_INFO's segments: at least one data segment each way.
            #expect(Self.total(metrics, "braid_packets_sent_total", serverSide) > 0)
            #expect(Self.total(metrics, "braid_packets_received_total", serverSide) > 0)
            #expect(try metrics.expectTimer("braid_handshake_duration_seconds", clientSide).values.count == 1)
            #expect(Self.total(metrics, "braid_connections_failed_total", []) == 0)
        }
    }

    @Test func tlsCountsRecordsAndHandshakes() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let server = try await RunningStreamListener.start(testTLSServer(), configure: { $0.metricsLabel = "tls-echo" })
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { testTLSClient() }
            try await connection.send(Self.payload, endOfStream: true)
            let echoed = try await connection.receive(exactly: Self.payload.count).content
            #expect(echoed == Self.payload)
            await connection.close()
            let serverSide = [("stack", "tls"), ("role", "server"), ("listener", "tls-echo")]
            let clientSide = [("stack", "tls"), ("role", "client"), ("listener", "")]
            try await Self.eventually("the server's close and traffic report") {
                Self.total(metrics, "braid_connections_closed_total", serverSide) == 1
                    && Self.total(metrics, "braid_bytes_received_total", serverSide) > 0
                    && Self.total(metrics, "braid_bytes_received_total", clientSide) > 0
            }
            let n = Int64(Self.payload.count)
            // Records carry the bytes plus the handshake, headers and tags: more than n, and
            // far less than twice n.
            for (side, label) in [(serverSide, "braid_bytes_received_total"), (serverSide, "braid_bytes_sent_total"),
                                  (clientSide, "braid_bytes_received_total"), (clientSide, "braid_bytes_sent_total")] {
                let bytes = Self.total(metrics, label, side)
                #expect(bytes > n && bytes < 2 * n, "\(label) \(side): \(bytes)")
            }
            #expect(Self.total(metrics, "braid_connections_opened_total", serverSide) == 1)
            #expect(try metrics.expectTimer("braid_handshake_duration_seconds", serverSide).values.count == 1)
            #expect(try metrics.expectTimer("braid_handshake_duration_seconds", clientSide).values.allSatisfy { $0 > 0 })
        }
    }

    @Test func quicCountsDatagramsBytesAndTheListenersGauges() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
                testServer()
            }
            listener.metricsLabel = "quic-echo"
            let task = Task { try await listener.run(echo) }
            for await state in listener.states where state == .ready { break }
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { testClient() }
            let stream = try await connection.openStream()
            try await stream.send(Self.payload, endOfStream: true)
            let echoed = try await stream.receive(exactly: Self.payload.count).content
            #expect(echoed == Self.payload)
            await connection.close()
            let serverSide = [("stack", "quic"), ("role", "server"), ("listener", "quic-echo")]
            let clientSide = [("stack", "quic"), ("role", "client"), ("listener", "")]
            try await Self.eventually("the server's end of the connection") {
                Self.total(metrics, "braid_connections_closed_total", serverSide) == 1
            }
            #expect(Self.total(metrics, "braid_connections_closed_total", serverSide + [("reason", "peer_closed")]) == 1)
            #expect(Self.total(metrics, "braid_connections_closed_total", clientSide + [("reason", "cancelled")]) == 1)
            let n = Int64(Self.payload.count)
            for side in [serverSide, clientSide] {
                #expect(Self.total(metrics, "braid_connections_opened_total", side) == 1)
                // UDP payloads: the stream's bytes, encrypted, plus the handshake and acknowledgements.
                let sent = Self.total(metrics, "braid_bytes_sent_total", side)
                let received = Self.total(metrics, "braid_bytes_received_total", side)
                #expect(sent > n && received > n, "\(side): sent \(sent), received \(received)")
                #expect(Self.total(metrics, "braid_packets_sent_total", side) >= n / 1500)
                #expect(Self.total(metrics, "braid_packets_received_total", side) >= n / 1500)
            }
            task.cancel()
            _ = try? await task.value
            // The listener's last reading, then zero once it stopped.
            #expect(try metrics.expectGauge("braid_listener_connections", [("stack", "quic"), ("listener", "quic-echo")]).lastValue == 0)
        }
    }

    /// What one end's application sent and received over a UDP connection, counted by the test.
    struct DatagramTally: Sendable, CustomStringConvertible {
        var sent = 0, sentBytes = 0, received = 0, receivedBytes = 0
        var description: String { "sent \(sent) (\(sentBytes) bytes), received \(received) (\(receivedBytes) bytes)" }
    }

    /// What the test counted on each end of `udpCountsDatagramsExactly`, and the sizes echoed.
    final class Tallies: Sendable {
        let server = Locked(DatagramTally())
        let client = Locked(DatagramTally())
        let echoed = Locked(Set<Int>())
    }

    /// A side's datagram counters as the metrics have them, in `DatagramTally`'s terms.
    static func reported(_ metrics: TestMetrics, _ side: [(String, String)]) -> DatagramTally {
        DatagramTally(
            sent: Int(total(metrics, "braid_packets_sent_total", side)), sentBytes: Int(total(metrics, "braid_bytes_sent_total", side)),
            received: Int(total(metrics, "braid_packets_received_total", side)),
            receivedBytes: Int(total(metrics, "braid_bytes_received_total", side)))
    }

    /// The kernel's UDP counters for this network namespace (`/proc/net/snmp`), by name:
    /// `RcvbufErrors` counts datagrams a full socket receive buffer dropped.
    static func kernelUDPCounters() -> [String: Int] {
        guard let text = try? String(contentsOfFile: "/proc/net/snmp", encoding: .utf8) else { return [:] }
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("Udp: ") }
        guard lines.count == 2 else { return [:] }
        let names = lines[0].split(separator: " ").dropFirst(), values = lines[1].split(separator: " ").dropFirst()
        return Dictionary(zip(names.map(String.init), values.compactMap { Int($0) }), uniquingKeysWith: { first, _ in first })
    }

    /// Every datagram and byte each end's application sent and received is counted once, on
    /// both ends. A datagram whose echo does not come back within 5 s is sent again (UDP may
    /// drop one, as a loaded kernel does when a socket's receive buffer is full), and what
    /// went missing is reported with the kernel's drop counters; the counts are then checked
    /// against what the applications saw, which without a loss is 3 datagrams and 2,000 bytes
    /// each way.
    @Test func udpCountsDatagramsExactly() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let kernelBefore = Self.kernelUDPCounters()
            let tallies = Tallies()
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { UDP() }
            listener.metricsLabel = "udp-echo"
            let task = Task {
                try await listener.run { connection in
                    while true {
                        let (content, _) = try await connection.receive()
                        tallies.server.withLock { $0.received += 1; $0.receivedBytes += content.count }
                        try await connection.send(content)
                        tallies.server.withLock { $0.sent += 1; $0.sentBytes += content.count }
                    }
                }
            }
            defer { task.cancel() }
            try await listener.waitUntilReady()
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { UDP() }
            // Reads every echo, resent ones too, so that what the client's end counted is all
            // read by the test.
            let reader = Task {
                while true {
                    let (content, _) = try await connection.receive()
                    tallies.client.withLock { $0.received += 1; $0.receivedBytes += content.count }
                    tallies.echoed.withLock { _ = $0.insert(content.count) }
                }
            }
            defer { reader.cancel() }
            let serverSide = [("stack", "udp"), ("role", "server"), ("listener", "udp-echo")]
            let clientSide = [("stack", "udp"), ("role", "client"), ("listener", "")]
            func state() -> String {
                let kernelNow = Self.kernelUDPCounters()
                let drops = ["RcvbufErrors", "InErrors", "MemErrors"].map { "\($0) +\((kernelNow[$0] ?? 0) - (kernelBefore[$0] ?? 0))" }
                // How each side's connections ended, by reason (a connection reports at its end).
                let endings = ["braid_connections_closed_total", "braid_connections_failed_total"].flatMap { label in
                    metrics.counters(label: label).filter { $0.totalValue > 0 }.map { counter in
                        "\(label) \(counter.dimensions.filter { $0.0 == "role" || $0.0 == "reason" }) \(counter.totalValue)"
                    }
                }
                return "client application \(tallies.client.withLock { $0 }), its end reported \(Self.reported(metrics, clientSide)); "
                    + "server application \(tallies.server.withLock { $0 }), its end reported \(Self.reported(metrics, serverSide)); "
                    + "connections ended: \(endings); "
                    + "kernel UDP counters since the test began (every socket in this network namespace, other processes' too): \(drops.joined(separator: ", "))"
            }
            let deadline = ContinuousClock.now + .seconds(120)
            for size in [1000, 700, 300] {
                var answered = false
                while !answered && ContinuousClock.now < deadline {
                    try await connection.send(Data(repeating: UInt8(size % 251), count: size))
                    tallies.client.withLock { $0.sent += 1; $0.sentBytes += size }
                    answered = try await waitUntil(within: .seconds(5)) { tallies.echoed.withLock { $0.contains(size) } }
                    if !answered { print("udpCountsDatagramsExactly: no echo of the \(size)-byte datagram within 5 s, sending it again: \(state())") }
                }
                try #require(answered, "the \(size)-byte datagram was never echoed within 120 s: \(state())")
            }
            // Whatever is still on its way (the echo of a datagram sent again) arrives and is
            // read first; only a datagram UDP lost keeps this from holding, which then ends the
            // wait at its deadline.
            let delivered = try await waitUntil {
                let (clientSaw, serverSaw) = (tallies.client.withLock { $0 }, tallies.server.withLock { $0 })
                return clientSaw.sent == serverSaw.received && serverSaw.sent == clientSaw.received
            }
            if !delivered { print("udpCountsDatagramsExactly: not every datagram sent arrived (UDP lost some): \(state())") }
            // Each end reports its traffic once it ends: the client's when it is cancelled, the
            // server's when its listener stops.
            reader.cancel()
            _ = try? await reader.value
            connection.cancel()
            task.cancel()
            _ = try? await task.value
            // Each end's counters settle on exactly what its application sent and read.
            let settled = try await waitUntil {
                let (clientSaw, serverSaw) = (tallies.client.withLock { $0 }, tallies.server.withLock { $0 })
                let (clientReported, serverReported) = (Self.reported(metrics, clientSide), Self.reported(metrics, serverSide))
                return clientReported.sent == clientSaw.sent && clientReported.sentBytes == clientSaw.sentBytes
                    && clientReported.received == clientSaw.received && clientReported.receivedBytes == clientSaw.receivedBytes
                    && serverReported.sent == serverSaw.sent && serverReported.sentBytes == serverSaw.sentBytes
                    && serverReported.received == serverSaw.received && serverReported.receivedBytes == serverSaw.receivedBytes
            }
            #expect(settled, "the counts do not match what the applications sent and read within 60 s: \(state())")
            if tallies.client.withLock({ $0.sent }) == 3 {
                // Nothing was sent again: the counts are the three datagrams, 2,000 bytes.
                for side in [serverSide, clientSide] {
                    let reported = Self.reported(metrics, side)
                    #expect(reported.sent == 3 && reported.received == 3 && reported.sentBytes == 2000 && reported.receivedBytes == 2000, "\(reported)")
                }
            }
            for side in [serverSide, clientSide] {
                #expect(Self.total(metrics, "braid_connections_opened_total", side) == 1, "\(side): \(state())")
            }
        }
    }

    /// A refused connection is a failure with reason `refused`, and not an opened connection.
    @Test func aRefusedConnectionCountsAsAFailureWithItsReason() async throws {
        let metrics = TestMetrics()
        await BraidMetrics.$factory.withValue(metrics) {
            // Port 9 (discard): nothing listens on it here, so the kernel refuses.
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9)) { TCP() }
            await #expect(throws: NetworkError.connectionRefused(endpoint: "127.0.0.1:9")) {
                try await connection.send(Data("x".utf8))
            }
            let clientSide = [("stack", "tcp"), ("role", "client"), ("listener", "")]
            #expect(Self.total(metrics, "braid_connections_failed_total", clientSide + [("reason", "refused")]) == 1)
            #expect(Self.total(metrics, "braid_connections_failed_total", clientSide) == 1)
            #expect(Self.total(metrics, "braid_connections_opened_total", clientSide) == 0)
        }
    }

    /// A QUIC handshake that fails inside the listener (the client offers an ALPN the server
    /// does not speak) counts as a failed server connection; a completed one is timed from the
    /// client's first Initial.
    @Test func quicServerHandshakesThatFailInsideTheListenerAreCounted() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
                testServer()
            }
            listener.metricsLabel = "quic-failing"
            let task = Task { try await listener.run(echo) }
            defer { task.cancel() }
            for await state in listener.states where state == .ready { break }
            let serverSide = [("stack", "quic"), ("role", "server"), ("listener", "quic-failing")]
            let wrong = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { testClient(alpn: ["nope"]) }
            await #expect(throws: NetworkError.self) { _ = try await wrong.openStream() }
            try await Self.eventually("the server's failed handshake") {
                Self.total(metrics, "braid_connections_failed_total", serverSide) == 1
            }
            #expect(Self.total(metrics, "braid_connections_failed_total", serverSide + [("reason", "tls")]) == 1)
            #expect(Self.total(metrics, "braid_connections_opened_total", serverSide) == 0)
            // A handshake that completes is timed (from the first Initial, on the engine's clock).
            let good = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { testClient() }
            let stream = try await good.openStream()
            try await stream.send(Data("x".utf8), endOfStream: true)
            _ = try await stream.receive(exactly: 1)
            try await Self.eventually("the server's opened connection") {
                Self.total(metrics, "braid_connections_opened_total", serverSide) == 1
            }
            let timer = try metrics.expectTimer("braid_handshake_duration_seconds", serverSide)
            #expect(timer.values.count == 1)
            #expect(timer.values.allSatisfy { $0 > 0 })
            await good.close()
        }
    }

    /// TCP clients refused at `newConnectionLimit` count in the listener's refusals.
    @Test func tcpRefusalsAtTheConnectionLimitAreCounted() async throws {
        let metrics = TestMetrics()
        try await BraidMetrics.$factory.withValue(metrics) {
            let server = try await RunningStreamListener.start(TCP(), configure: {
                $0.metricsLabel = "tcp-limit"
                $0.newConnectionLimit = 1
            })
            defer { server.task.cancel() }
            let first = NetworkConnection(to: server.endpoint) { TCP() }
            try await first.send(Data("a".utf8))
            #expect(try await first.receive(exactly: 1).content == Data("a".utf8))
            // The listener is full: the second is reset as it is accepted.
            let second = NetworkConnection(to: server.endpoint) { TCP() }
            await #expect(throws: NetworkError.self) {
                try await second.send(Data("b".utf8))
                _ = try await second.receive(exactly: 1)
            }
            try await Self.eventually("the listener's refusal") {
                Self.total(metrics, "braid_listener_refused_total", [("stack", "tcp"), ("listener", "tcp-limit")]) == 1
            }
            await first.close()
        }
    }

    /// A metrics factory that is a struct (wrapping a backend elsewhere) keeps one client
    /// reporter per stack: its handles are made once, not per connection.
    @Test func aStructFactoryKeepsItsClientReporter() async throws {
        let factory = CountingFactory()
        try await BraidMetrics.$factory.withValue(factory) {
            let server = try await RunningStreamListener.start(TCP())
            defer { server.task.cancel() }
            for _ in 0..<3 {
                let connection = NetworkConnection(to: server.endpoint) { TCP() }
                try await connection.send(Data("a".utf8))
                _ = try await connection.receive(exactly: 1)
                await connection.close()
            }
            // One client reporter (and the listener's): two handles of this name, not four.
            #expect(factory.made("braid_connections_opened_total") == 2)
            #expect(Self.total(factory.metrics, "braid_connections_opened_total", [("role", "client")]) == 3)
        }
    }
}

/// A struct metrics factory over a `TestMetrics`, counting the handles made per label.
struct CountingFactory: MetricsFactory {
    final class Counts: Sendable {
        let made = Locked<[String: Int]>([:])
    }
    let metrics = TestMetrics()
    private let counts = Counts()

    func made(_ label: String) -> Int { counts.made.withLock { $0[label] ?? 0 } }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        counts.made.withLock { $0[label, default: 0] += 1 }
        return metrics.makeCounter(label: label, dimensions: dimensions)
    }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        metrics.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        metrics.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        metrics.makeMeter(label: label, dimensions: dimensions)
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        metrics.makeTimer(label: label, dimensions: dimensions)
    }
    func destroyCounter(_ handler: any CounterHandler) { metrics.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { metrics.destroyFloatingPointCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { metrics.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { metrics.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) { metrics.destroyTimer(handler) }
}
