import Braid
import BraidPerf
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One direction of messages between the `framed-client` and `framed-server` roles: the client
/// sends `messages` messages after the handshake, the server receives and counts them, then
/// closes; the client's time runs from its first send until it sees that close (the handshake
/// excluded, as for the raw rows). CPU is each process's user + system time from `wait4`,
/// start-up and handshake included.
struct FramedTransfer {
    var messages: Int
    var seconds: Double
    /// Value bytes the server received (TLV; the 8-byte headers are not counted).
    var valueBytes: Int
    var clientCPU: Double
    var serverCPU: Double

    static func run(_ bench: Bench, framer: String, size: Int, messages: Int) async throws -> FramedTransfer {
        let serverFlags = ["framer": framer, "messages": String(messages), "cert": Bench.certificate, "key": Bench.key, "port": "0"]
        let clientFlags = ["framer": framer, "messages": String(messages), "size": String(size)]
        let run = try await bench.pair(server: "framed-server", client: "framed-client", serverFlags: serverFlags, clientFlags: clientFlags)
        let counted = run.server["messages"] as? Int ?? 0
        guard counted == messages else { throw ApplicationFailure("\(framer): the server counted \(counted) of \(messages) messages") }
        return FramedTransfer(
            messages: messages, seconds: run.client["seconds"] as? Double ?? 0, valueBytes: run.server["bytes"] as? Int ?? 0,
            clientCPU: run.clientExit.cpuSeconds, serverCPU: run.serverExit.cpuSeconds)
    }

    var messagesPerSecond: Double { seconds > 0 ? Double(messages) / seconds : 0 }
    var goodputGbits: Double { seconds > 0 ? Double(valueBytes) * 8 / seconds / 1e9 : 0 }
    /// Microseconds of CPU per message: client, server, both.
    var cpuPerMessage: (client: Double, server: Double, total: Double) {
        let n = Double(messages)
        return (clientCPU * 1e6 / n, serverCPU * 1e6 / n, (clientCPU + serverCPU) * 1e6 / n)
    }
}

/// The framer rows, in the `throughput` scenario: TLV over TLS with 100 B and 1 KiB
/// values beside the raw GnuTLS loop moving the same number of value bytes (64 KiB writes),
/// and Coder JSON (`BenchMove`) beside JSONEncoder/JSONDecoder alone on the same values,
/// in this process.
enum FramerRows {
    static let tlvSizes = [100, 1024]
    /// Row names (at most 34 characters: the printed column's width).
    static func configTLV(_ size: Int) -> String { "braid tlv over tls, \(sizeName(size)) msgs" }
    /// The raw GnuTLS loop (64 KiB writes) moving the value bytes of the TLV row; its
    /// "messages" are those bytes divided by the TLV row's value size.
    static func configRaw(_ size: Int) -> String { "raw tls, same bytes as \(sizeName(size)) msgs" }
    static let configCoder = "braid coder json over tls"
    /// JSONEncoder and JSONDecoder alone, in the harness's process: a fresh one per value, as
    /// `.json` does; and one of each reused for every value.
    static let configJSON = "json encode+decode alone"
    static let configJSONReused = "json encode+decode alone, reused"
    /// The same values through Coder's framing without a transport, in this process: encoded
    /// as `.json` does, framed as a connection's send frames them (TLV header and value in one
    /// buffer), fed to a `TLVDecoder` in 64 KiB reads as a connection's receive feeds it, and
    /// decoded by `CoderFraming` as `receive()` decodes them. What the framing adds to JSON.
    static let configCoderFraming = "coder framing + json, no transport"

    private static func sizeName(_ size: Int) -> String { size == 1024 ? "1 KiB" : "\(size) B" }

    static func messages(_ bench: Bench, size: Int) -> Int {
        switch size {
        case 100: bench.quick ? 500_000 : 1_000_000
        case 1024: bench.quick ? 200_000 : 500_000
        default: bench.quick ? 200_000 : 400_000  // Coder
        }
    }

    /// What each round gathers.
    final class Samples {
        var goodput: [String: [Double]] = [:]
        var rate: [String: [Double]] = [:]
        var cpu: [String: [(client: Double, server: Double, total: Double)]] = [:]
    }

    /// One round: every framed row and its raw or in-process reference once.
    static func round(_ bench: Bench, _ samples: Samples) async throws {
        for size in tlvSizes {
            bench.row("\(configTLV(size)), \(configRaw(size))")
            let count = messages(bench, size: size)
            let tlv = try await FramedTransfer.run(bench, framer: "tlv", size: size, messages: count)
            guard tlv.valueBytes == count * size else { throw ApplicationFailure("tlv: \(tlv.valueBytes) of \(count * size) value bytes") }
            samples.goodput[configTLV(size), default: []].append(tlv.goodputGbits)
            samples.rate[configTLV(size), default: []].append(tlv.messagesPerSecond)
            samples.cpu[configTLV(size), default: []].append(tlv.cpuPerMessage)
            let raw = try await RawTransfer.run(bench, kind: "tls", bytes: count * size, payload: 65536)
            samples.goodput[configRaw(size), default: []].append(raw.goodputGbits)
            samples.rate[configRaw(size), default: []].append(raw.goodputGbits * 1e9 / 8 / Double(size))
            let perByte = raw.cpuNanosecondsPerByte
            let scale = Double(size) / 1000  // ns per byte -> us per message
            samples.cpu[configRaw(size), default: []].append((perByte.client * scale, perByte.server * scale, perByte.total * scale))
        }
        let count = messages(bench, size: 0)
        bench.row("\(configCoder), \(configJSON), \(configJSONReused), \(configCoderFraming)")
        let coder = try await FramedTransfer.run(bench, framer: "coder", size: 0, messages: count)
        samples.rate[configCoder, default: []].append(coder.messagesPerSecond)
        samples.cpu[configCoder, default: []].append(coder.cpuPerMessage)
        // The first values the Coder row sent (the cost per value is flat beyond a few thousand),
        // in slices that take turns, so the machine's drift falls on the three rows alike.
        let slices = 10, slice = min(count, 200_000) / slices
        var alone: [(client: Double, server: Double, total: Double)] = []
        var reused = alone, framed = alone
        for _ in 0..<slices {
            alone.append(try jsonAlone(slice, reuse: false))
            framed.append(try coderFramingAlone(slice))
            reused.append(try jsonAlone(slice, reuse: true))
        }
        for (config, runs) in [(configJSON, alone), (configJSONReused, reused), (configCoderFraming, framed)] {
            let n = Double(runs.count)
            let mean = (runs.map(\.client).reduce(0, +) / n, runs.map(\.server).reduce(0, +) / n, runs.map(\.total).reduce(0, +) / n)
            samples.rate[config, default: []].append(1e6 / mean.2)
            samples.cpu[config, default: []].append(mean)
        }
    }

    static func record(_ bench: Bench, _ samples: Samples, scenario: String) {
        let configs = tlvSizes.flatMap { [configTLV($0), configRaw($0)] } + [configCoder, configJSON, configJSONReused, configCoderFraming]
        for config in configs {
            bench.results.recordRepeated(scenario, config, "messages per second", samples.rate[config] ?? [], "msg/s")
            if let goodput = samples.goodput[config] { bench.results.recordRepeated(scenario, config, "goodput", goodput, "Gbit/s") }
            let runs = (samples.cpu[config] ?? []).sorted { $0.total < $1.total }
            guard !runs.isEmpty else { continue }
            let median = runs[runs.count / 2]
            let inProcess = config.hasPrefix("json ") || config == configCoderFraming
            let (clientName, serverName) = inProcess ? ("encode", "decode") : ("client", "server")
            bench.results.record(scenario, config, "cpu per message, \(clientName)", median.client, "us")
            bench.results.record(scenario, config, "cpu per message, \(serverName)", median.server, "us")
            bench.results.record(scenario, config, "cpu per message, total", median.total, "us")
        }
    }

    /// CPU time of this thread (`CLOCK_THREAD_CPUTIME_ID`: user + system), in seconds.
    private static func threadCPU() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// JSONEncoder then JSONDecoder alone on the values the Coder rows send, in this process
    /// and on one thread (no suspension inside): us of CPU per message to encode, to decode,
    /// and both. `reuse: false` makes a fresh encoder and decoder per value, as `.json` does;
    /// `reuse: true` one of each for all values.
    static func jsonAlone(_ count: Int, reuse: Bool) throws -> (client: Double, server: Double, total: Double) {
        var encoded: [Data] = []
        encoded.reserveCapacity(count)
        let sharedEncoder = JSONEncoder(), sharedDecoder = JSONDecoder()
        let start = threadCPU()
        for sequence in 0..<count {
            encoded.append(try (reuse ? sharedEncoder : JSONEncoder()).encode(BenchMove.sample(sequence)))
        }
        let middle = threadCPU()
        var checksum = 0
        for data in encoded {
            checksum &+= try (reuse ? sharedDecoder : JSONDecoder()).decode(BenchMove.self, from: data).sequence
        }
        let end = threadCPU()
        guard checksum == (0..<count).reduce(0, &+) else { throw ApplicationFailure("json: decoded values differ") }
        let n = Double(count)
        return ((middle - start) * 1e6 / n, (end - middle) * 1e6 / n, (end - start) * 1e6 / n)
    }

    /// `configCoderFraming`: us of CPU per message to encode and frame, to deframe and
    /// decode, and both, in this process on one thread.
    static func coderFramingAlone(_ count: Int) throws -> (client: Double, server: Double, total: Double) {
        var stream = Data()
        let start = threadCPU()
        for sequence in 0..<count {
            let value = try CoderFraming.encode(BenchMove.sample(sequence), using: .json)
            let length = UInt32(value.count)
            withUnsafeTemporaryAllocation(byteCount: TLVFraming.headerSize + value.count, alignment: 8) { message in
                TLVEncoder.write(value, type: CoderFraming.messageType, length: length, into: message)
                stream.append(message.baseAddress!.assumingMemoryBound(to: UInt8.self), count: message.count)
            }
        }
        let middle = threadCPU()
        var decoder = TLVDecoder()
        var checksum = 0, offset = 0
        while offset < stream.count {
            let read = min(64 * 1024, stream.count - offset)
            decoder.append(stream.subdata(in: offset..<(offset + read)))
            offset += read
            while let message = try decoder.next(sharingStorage: true) {
                checksum &+= try CoderFraming.decode(BenchMove.self, from: message, using: .json).sequence
            }
        }
        let end = threadCPU()
        guard checksum == (0..<count).reduce(0, &+), decoder.isAtMessageBoundary else {
            throw ApplicationFailure("coder framing: decoded values differ")
        }
        let n = Double(count)
        return ((middle - start) * 1e6 / n, (end - middle) * 1e6 / n, (end - start) * 1e6 / n)
    }
}
