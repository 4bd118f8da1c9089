import Braid
import BraidIO
import BraidPerf
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The plain UDP roles over the public API (`NetworkConnection { UDP() }` and
/// `NetworkListener { UDP() }`), doing what the raw UDP loops do (`Baselines/RawBulk.swift`):
/// the client sends `--bytes` bytes in `--payload`-byte datagrams, then the 1-byte end marker
/// (`RawBaselines.endMarker`) `markerCount` times `markerInterval` apart; the server counts the
/// payload bytes it received (UDP loses what the receiver cannot keep up with) until the
/// marker, or 2 s after the last datagram once data has started. `--batch N` (client) sends in
/// `connection.batch` blocks of N datagrams (0: plain `send` calls); `--batching none` (both)
/// is `UDP().batching(.none)`.
extension Roles {
    static func udpStack(_ flags: Flags) -> UDP {
        flags["batching"] == "none" ? UDP().batching(.none) : UDP()
    }

    static func socketCallsJSON(_ counters: SocketStatistics?) -> [String: Int] {
        guard let counters else { return [:] }
        return [
            "sendmsg": Int(counters.sendmsgCalls), "sendmmsg": Int(counters.sendmmsgCalls),
            "recvmsg": Int(counters.recvmsgCalls), "recvmmsg": Int(counters.recvmmsgCalls),
        ]
    }

    /// `udp-server`: serves the first peer's connection, counting payload bytes until the end
    /// marker (or the idle timeout); prints `{"bytes", "messages", "syscalls"}` (the listener
    /// socket's counters).
    static func udpServer(_ flags: Flags) async throws {
        let stack = udpStack(flags)
        let listener = NetworkListener(for: .hostPort(host: NWEndpoint.Host(benchHost), port: .any)) { stack }
        let result = Mutex<(bytes: Int, messages: Int, calls: [String: Int])?>(nil)
        let done = AsyncStream<Void>.makeStream()
        let serving = Task {
            try await listener.run { connection in
                defer { done.continuation.finish() }
                let lastArrival = Atomic<UInt64>(0)
                let idle = Task {
                    // The raw server's receive timeout: give up 2 s after the last datagram.
                    while !Task.isCancelled {
                        try await Task.sleep(for: .milliseconds(250))
                        let last = lastArrival.load(ordering: .relaxed)
                        if last != 0 && DispatchTime.now().uptimeNanoseconds - last > UInt64(RawBaselines.datagramIdleSeconds) * 1_000_000_000 {
                            connection.cancel()
                            return
                        }
                    }
                }
                var bytes = 0, messages = 0
                do {
                    for try await (content, _) in connection.messages {
                        // A clock read every 256 datagrams, not each: the idle check's unit is seconds.
                        if messages & 255 == 0 { lastArrival.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }
                        if content.count == 1 && content.first == RawBaselines.endMarker { break }
                        bytes += content.count
                        messages += 1
                    }
                } catch {}
                idle.cancel()
                let calls = socketCallsJSON(await connection.socketStatistics)
                result.withLock { $0 = (bytes, messages, calls) }
                connection.cancel()
            }
        }
        try await announceListening(listener)
        for await _ in done.stream {}
        serving.cancel()
        _ = try? await serving.value
        guard let (bytes, messages, calls) = result.withLock({ $0 }) else { throw ApplicationFailure("no peer") }
        printJSON(["bytes": bytes, "messages": messages, "syscalls": calls])
    }

    /// `udp-client`: sends `--bytes` in `--payload`-byte datagrams (in `batch` blocks of
    /// `--batch`), then the end markers; the time covers the sends only, as the raw client's.
    /// `--rate` paces the payload at that many Mbit/s (checked every 64 datagrams; 0, the
    /// default: as fast as it can), so a receiver that keeps up drops nothing and its CPU per
    /// byte is its own cost, not a share of an overload (`tools/ab/udp.sh` with RATE).
    /// Prints `{"bytes", "seconds", "syscalls"}` (its socket's counters).
    static func udpClient(_ flags: Flags) async throws {
        let total = flags.int("bytes", 0), payload = flags.int("payload", 1200), batch = flags.int("batch", 0)
        let megabitsPerSecond = flags.int("rate", 0)
        let stack = udpStack(flags)
        let connection = NetworkConnection(to: streamEndpoint(flags)) { stack }
        let datagram = Data(repeating: RawBaselines.payloadByte, count: payload)
        let count = (total + payload - 1) / payload
        let start = ContinuousClock.now
        /// Waits until `sent` datagrams are due at the rate.
        func pace(_ sent: Int) async throws {
            guard megabitsPerSecond > 0 else { return }
            let due = start + .nanoseconds(sent * payload * 8 * 1000 / megabitsPerSecond)
            if due > ContinuousClock.now { try await Task.sleep(until: due) }
        }
        let group = batch > 0 ? batch : 64
        var sent = 0
        while sent < count {
            let size = min(group, count - sent)
            if batch > 0 {
                try await connection.batch {
                    for _ in 0..<size { try await connection.send(datagram) }
                }
            } else {
                for _ in 0..<size { try await connection.send(datagram) }
            }
            sent += size
            try await pace(sent)
        }
        let seconds = (ContinuousClock.now - start).seconds
        for index in 0..<RawBaselines.markerCount {
            if index > 0 { try await Task.sleep(for: .microseconds(Int(RawBaselines.markerIntervalMicroseconds))) }
            do { try await connection.send([RawBaselines.endMarker]) } catch { break }  // the server has gone
        }
        let calls = socketCallsJSON(await connection.socketStatistics)
        connection.cancel()
        printJSON(["bytes": count * payload, "seconds": seconds, "syscalls": calls])
    }
}

/// A Braid UDP bulk transfer between `udp-client` and `udp-server`, as `RawTransfer` for the raw
/// UDP loops.
struct UDPTransfer {
    var bytesSent: Double
    var bytesReceived: Double
    var clientCPU: Double
    var serverCPU: Double
    var clientSyscalls: Int
    var serverSyscalls: Int
    var perfClientSyscalls: Int?
    var perfServerSyscalls: Int?
    /// Datagrams each end sent or received (the client's `--payload`-byte datagrams).
    var messagesSent: Double
    var messagesReceived: Double
    /// Context switches of each process, all threads (from `wait4`).
    var clientSwitches: Int
    var serverSwitches: Int
    /// futex calls of each process (`perf stat`), when counted.
    var perfClientFutex: Int?
    var perfServerFutex: Int?

    static let calls = ["sendmsg", "sendmmsg", "recvmsg", "recvmmsg"]

    /// `batch`: datagrams per `batch` block (0: plain sends); `batchingOff`: `UDP().batching(.none)`;
    /// `rate`: Mbit/s the client paces itself to (0: as fast as it can).
    static func run(
        _ bench: Bench, bytes: Int, payload: Int, batch: Int, batchingOff: Bool = false, perfStat: Bool = false, rate: Int = 0
    ) async throws -> UDPTransfer {
        var serverFlags = ["port": "0"]
        var clientFlags = ["bytes": String(bytes), "payload": String(payload), "batch": String(batch)]
        if rate > 0 { clientFlags["rate"] = String(rate) }
        if batchingOff {
            serverFlags["batching"] = "none"
            clientFlags["batching"] = "none"
        }
        let run = try await bench.pair(server: "udp-server", client: "udp-client", serverFlags: serverFlags, clientFlags: clientFlags, perfStat: perfStat)
        let received = Double(run.server["bytes"] as? Int ?? 0)
        guard received > 0 else { throw ApplicationFailure("braid udp: the server received nothing") }
        func sum(_ report: [String: Any]) -> Int { (report["syscalls"] as? [String: Int] ?? [:]).values.reduce(0, +) }
        return UDPTransfer(
            bytesSent: Double(run.client["bytes"] as? Int ?? bytes), bytesReceived: received,
            clientCPU: run.clientExit.cpuSeconds, serverCPU: run.serverExit.cpuSeconds,
            clientSyscalls: sum(run.client), serverSyscalls: sum(run.server),
            perfClientSyscalls: run.perf.map { perf in calls.reduce(0) { $0 + (perf.client[$1] ?? 0) } },
            perfServerSyscalls: run.perf.map { perf in calls.reduce(0) { $0 + (perf.server[$1] ?? 0) } },
            messagesSent: Double(run.client["bytes"] as? Int ?? bytes) / Double(payload),
            messagesReceived: Double(run.server["messages"] as? Int ?? 0),
            clientSwitches: run.clientExit.contextSwitches, serverSwitches: run.serverExit.contextSwitches,
            perfClientFutex: run.perf?.client["futex"], perfServerFutex: run.perf?.server["futex"])
    }

    /// Each end's context switches and futex calls per 1,000 datagrams it sent or received.
    var waitsPerThousandMessages: (clientSwitches: Double, serverSwitches: Double, clientFutex: Double?, serverFutex: Double?) {
        let sent = max(messagesSent, 1) / 1000, received = max(messagesReceived, 1) / 1000
        return (
            Double(clientSwitches) / sent, Double(serverSwitches) / received,
            perfClientFutex.map { Double($0) / sent }, perfServerFutex.map { Double($0) / received }
        )
    }

    /// Each end per byte it handled, as the raw UDP rows.
    var cpuNanosecondsPerByte: (client: Double, server: Double, total: Double) {
        CPUPerByte.split(clientCPU: clientCPU, bytesSent: bytesSent, serverCPU: serverCPU, bytesReceived: bytesReceived)
    }
}
