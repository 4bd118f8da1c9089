import BraidPerf
import Foundation

/// An echo run between the `app-client` and `app-server` roles over a stack other than QUIC
/// (`ApplicationStack`): `messages` messages of `size` bytes, each a datagram (UDP, DTLS) or a
/// binary message (WebSocket), at most `ApplicationClient.datagramWindow` awaiting their echo,
/// every echo checked. CPU is each process's user + system time from `wait4`, start-up and
/// handshake included.
struct StackEcho {
    var messages: Int
    /// The client's time from its start to the last echo, the handshake included (as the QUIC
    /// datagram rows), and the handshake's part of it.
    var seconds: Double
    var handshakeSeconds: Double
    /// Payload bytes both ways.
    var payloadBytes: Double
    var clientCPU: Double
    var serverCPU: Double

    static func run(_ bench: Bench, stack: ApplicationStack, size: Int, messages: Int) async throws -> StackEcho {
        let server = try bench.role("app-server", ["stack": stack.rawValue, "alpn": "echo", "cert": Bench.certificate, "key": Bench.key])
        let report: [String: Any], clientExit: ChildProcess.Exit
        do {
            let port = try await server.listeningPort()
            (report, clientExit) = try await bench.runClient(
                "app-client", port: port,
                ["stack": stack.rawValue, "alpn": "echo", "streams": "0", "datagrams": String(messages), "datagram-size": String(size)])
        } catch {
            _ = try? await server.stop()
            throw error
        }
        let serverExit = try await server.stop(within: 30)
        guard serverExit.status == 0 else { throw ApplicationFailure("app-server (\(stack)) exited \(serverExit.status): \(server.errors.suffix(600))") }
        let echoed = report["datagrams_received"] as? Int ?? 0
        guard echoed == messages else { throw ApplicationFailure("\(stack) echo: \(echoed) of \(messages) messages came back") }
        let sent = report["bytes_sent"] as? Int ?? 0, received = report["bytes_received"] as? Int ?? 0
        return StackEcho(
            messages: messages, seconds: report["seconds"] as? Double ?? 0, handshakeSeconds: (report["handshake_ms"] as? Double ?? 0) / 1000,
            payloadBytes: Double(sent + received), clientCPU: clientExit.cpuSeconds, serverCPU: serverExit.cpuSeconds)
    }

    var goodputGbits: Double { seconds > 0 ? payloadBytes * 8 / seconds / 1e9 : 0 }
    /// Echoed messages per second, the handshake excluded (as the Python pair's client times it).
    var messagesPerSecond: Double { seconds > handshakeSeconds ? Double(messages) / (seconds - handshakeSeconds) : 0 }
    /// Microseconds of CPU per echoed message: client, server, both.
    var cpuPerMessage: (client: Double, server: Double, total: Double) {
        let n = Double(messages)
        return (clientCPU * 1e6 / n, serverCPU * 1e6 / n, (clientCPU + serverCPU) * 1e6 / n)
    }
    /// Nanoseconds of CPU per payload byte (both ways), both processes: as the QUIC datagram rows.
    var cpuNanosecondsPerByte: Double { (clientCPU + serverCPU) * 1e9 / payloadBytes }
}

/// Python's `websockets` echo pair (`tools/peers/websockets-echo/websockets_echo.py`, from the
/// project's venv `.build-python`) over TLS, doing what the Braid `wss` echo row does.
enum PythonWebSocketEcho {
    static let script = "tools/peers/websockets-echo/websockets_echo.py"
    static let python = ".build-python/bin/python3"

    /// Whether the venv has `websockets` (tools/install-deps.sh installs it), or why not.
    static func available() async -> String? {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            return "\(python) is missing (tools/install-deps.sh makes it)"
        }
        guard let probe = try? ChildProcess(python, ["-c", "import websockets"]), let exit = try? await probe.finish(within: 60), exit.status == 0 else {
            return "Python's websockets is not installed in .build-python (tools/install-deps.sh installs it)"
        }
        return nil
    }

    static func run(size: Int, messages: Int) async throws -> StackEcho {
        let server = try ChildProcess(python, [script, "server", "--port", "0", "--cert", Bench.certificate, "--key", Bench.key])
        let client: ChildProcess, clientExit: ChildProcess.Exit
        do {
            let port = try await server.listeningPort()
            client = try ChildProcess(
                python,
                [script, "client", "--url", "wss://127.0.0.1:\(port)/", "--ca", Bench.ca, "--messages", String(messages), "--size", String(size),
                 "--window", String(ApplicationClient.datagramWindow)])
            clientExit = try await client.finish(within: 600)
        } catch {
            _ = try? await server.stop()
            throw error
        }
        let serverExit = try await server.finish(within: 30)
        guard clientExit.status == 0, serverExit.status == 0, let report = client.jsonLines.last, let seconds = report["seconds"] as? Double,
            server.jsonLines.last?["messages"] as? Int == messages
        else {
            throw ApplicationFailure("python websockets echo: client exited \(clientExit.status), server \(serverExit.status): \(client.errors.suffix(300)) \(server.errors.suffix(300))")
        }
        return StackEcho(
            messages: messages, seconds: seconds, handshakeSeconds: 0, payloadBytes: Double(2 * messages * size),
            clientCPU: clientExit.cpuSeconds, serverCPU: serverExit.cpuSeconds)
    }
}

/// Scenario `stacks`: Braid's WebSocket and DTLS beside what they compete with, measured in the
/// same run. WebSocket over TLS (`WebSocket { TLS() }`), echo of 100 B, 1 KiB and 64 KiB binary
/// messages, beside TLV over TLS (one direction, `FramedTransfer`) and Python's `websockets`
/// echo pair; DTLS echo of 100 B and 1,150 B datagrams beside QUIC datagrams (the throughput
/// scenario's echo rows), Braid `UDP()` echo and the raw UDP loop (one direction, 1,200-byte
/// datagrams).
enum StackRows {
    static let scenario = "stacks"
    static let messageSizes = [100, 1024, 65536]
    static let datagramSizes = [100, CPUCost.largeDatagram]

    static func sizeName(_ size: Int) -> String { size >= 1024 ? "\(size / 1024) KiB" : "\(size) B" }
    /// Row names (at most 34 characters: the printed column's width).
    static func configWebSocket(_ size: Int) -> String { "braid wss echo, \(sizeName(size)) msgs" }
    static func configPython(_ size: Int) -> String { "python websockets echo, \(sizeName(size))" }
    static func configTLV(_ size: Int) -> String { "braid tlv over tls, \(sizeName(size)) msgs" }
    static func configDTLS(_ size: Int) -> String { "braid dtls datagrams \(size) B (echo)" }
    static func configQUIC(_ size: Int) -> String { "quic datagrams \(size) B (echo)" }
    static let configUDP = "braid udp datagrams 1150 B (echo)"
    static let configRawUDP = "raw udp, one datagram per call"

    static func echoMessages(_ bench: Bench, size: Int) -> Int {
        let count = size >= 65536 ? 2_000 : 20_000
        return bench.quick ? count : count * 5
    }

    static func run(_ bench: Bench) async throws {
        let repetitions = bench.quick ? 1 : 3
        let pythonMissing = await PythonWebSocketEcho.available()
        if let pythonMissing { bench.results.note("\(pythonMissing): no python websockets rows") }
        var rates: [String: [Double]] = [:], goodputs: [String: [Double]] = [:]
        var perMessage: [String: [(client: Double, server: Double, total: Double)]] = [:]
        var perByte: [String: [Double]] = [:]
        let datagrams = bench.quick ? 20_000 : 100_000
        let rawBytes = (bench.quick ? 64 : 500) * 1_000_000
        for round in 0..<repetitions {
            for size in messageSizes {
                bench.row("\(configWebSocket(size)), \(configPython(size)), \(configTLV(size))", round: round, of: repetitions)
                let count = echoMessages(bench, size: size)
                let braid = try await StackEcho.run(bench, stack: .wss, size: size, messages: count)
                rates[configWebSocket(size), default: []].append(braid.messagesPerSecond)
                perMessage[configWebSocket(size), default: []].append(braid.cpuPerMessage)
                if pythonMissing == nil {
                    let python = try await PythonWebSocketEcho.run(size: size, messages: count)
                    rates[configPython(size), default: []].append(python.messagesPerSecond)
                    perMessage[configPython(size), default: []].append(python.cpuPerMessage)
                }
                let tlvCount = size >= 65536 ? (bench.quick ? 5_000 : 20_000) : FramerRows.messages(bench, size: size)
                let tlv = try await FramedTransfer.run(bench, framer: "tlv", size: size, messages: tlvCount)
                rates[configTLV(size), default: []].append(tlv.messagesPerSecond)
                perMessage[configTLV(size), default: []].append(tlv.cpuPerMessage)
            }
            for size in datagramSizes {
                bench.row("\(configDTLS(size)), \(configQUIC(size))", round: round, of: repetitions)
                let dtls = try await StackEcho.run(bench, stack: .dtls, size: size, messages: datagrams)
                goodputs[configDTLS(size), default: []].append(dtls.goodputGbits)
                perByte[configDTLS(size), default: []].append(dtls.cpuNanosecondsPerByte)
                let quic = try await QUICTransfer.run(
                    bench, config: [:], client: ["alpn": "echo", "streams": "0", "datagrams": String(datagrams), "datagram-size": String(size)])
                goodputs[configQUIC(size), default: []].append(quic.goodputGbits)
                perByte[configQUIC(size), default: []].append(quic.cpuNanosecondsPerByte.total)
            }
            bench.row("\(configUDP), \(configRawUDP)", round: round, of: repetitions)
            let udp = try await StackEcho.run(bench, stack: .udp, size: CPUCost.largeDatagram, messages: datagrams)
            goodputs[configUDP, default: []].append(udp.goodputGbits)
            perByte[configUDP, default: []].append(udp.cpuNanosecondsPerByte)
            let raw = try await RawTransfer.run(bench, kind: "udp", bytes: rawBytes, payload: 1200)
            goodputs[configRawUDP, default: []].append(raw.goodputGbits)
            perByte[configRawUDP, default: []].append(raw.cpuNanosecondsPerByte.total)
        }
        for size in messageSizes {
            for config in [configWebSocket(size), configPython(size), configTLV(size)] {
                guard let runs = perMessage[config], !runs.isEmpty else { continue }
                bench.results.recordRepeated(scenario, config, "messages per second", rates[config] ?? [], "msg/s")
                let median = runs.sorted { $0.total < $1.total }[runs.count / 2]
                bench.results.record(scenario, config, "cpu per message, client", median.client, "us")
                bench.results.record(scenario, config, "cpu per message, server", median.server, "us")
                bench.results.record(scenario, config, "cpu per message, total", median.total, "us")
            }
        }
        for config in datagramSizes.flatMap({ [configDTLS($0), configQUIC($0)] }) + [configUDP, configRawUDP] {
            bench.results.recordRepeated(scenario, config, "goodput", goodputs[config] ?? [], "Gbit/s")
            bench.results.recordRepeated(scenario, config, "cpu per byte, total", perByte[config] ?? [], "ns/B")
        }
    }
}
