import Foundation

/// The run's results as the targets summary, JSON and an HTML page of SVG charts.
enum Report {
    /// The project's performance targets, each with the measured ratio (or why it has none).
    static func targets(_ results: Results) -> [(target: String, measured: String, met: Bool?)] {
        func value(_ scenario: String, _ config: String, _ metric: String) -> Double? { results.value(scenario, config, metric) }
        func check(_ target: String, _ ratio: Double?, _ limit: Double, atMost: Bool) -> (String, String, Bool?) {
            guard let ratio else { return (target, "not measured in this run", nil) }
            return (target, String(format: "%.2fx", ratio), atMost ? ratio <= limit : ratio >= limit)
        }
        /// Resident memory per idle connection at most `limit` KiB.
        func checkKiB(_ target: String, _ kibibytes: Double?, _ limit: Double) -> (String, String, Bool?) {
            guard let kibibytes else { return (target, "not measured in this run", nil) }
            return (target, String(format: "%.1f KiB", kibibytes), kibibytes <= limit)
        }
        let quicGoodput = value("throughput", "quic 1 stream", "goodput median")
        let ngtcp2Goodput = value("throughput", "ngtcp2 examples (gnutls), 1 stream", "goodput median")
        // QUIC's targets.
        var rows = [check("QUIC bulk goodput, 1 stream >= 2x ngtcp2's example pair", ratio(quicGoodput, ngtcp2Goodput), 2, atMost: false)]
        rows.append(check(
            "QUIC goodput, 64 streams >= 0.9x 1 stream",
            ratio(value("throughput", "quic 64 streams", "goodput median"), quicGoodput), 0.9, atMost: false))
        for side in ["client", "server"] {
            let on = value("syscalls", "quic bulk, all batching on", "\(side) syscalls per MB")
            let off = value("syscalls", "quic bulk, all batching off", "\(side) syscalls per MB")
            rows.append(check("\(side) syscalls/MB with batching <= 1/20 of without (ratio shown)", ratio(on, off), 0.05, atMost: true))
        }
        rows.append(check(
            "QUIC CPU per byte (both ends) <= 1.5x raw TCP+TLS",
            ratio(value("cpu", "braid quic stream", "cpu per byte, total"), value("cpu", "raw tcp+tls1.3 (gnutls)", "cpu per byte, total")), 1.5, atMost: true))
        rows.append(check(
            "batched datagram CPU per byte <= 0.5x raw one-datagram-per-call UDP",
            ratio(value("cpu", "braid quic datagrams", "cpu per byte, total"), value("cpu", "raw udp, one datagram per call", "cpu per byte, total")), 0.5, atMost: true))
        rows.append(check(
            "QUIC time to ready on loopback <= 1.5x TCP+TLS",
            ratio(value("establishment", "braid quic 1-rtt loopback", "ready p50"), value("establishment", "raw tcp+tls1.3 (gnutls) loopback", "ready p50")), 1.5, atMost: true))
        rows.append(check("QUIC ready at 20 ms RTT in ~1 RTT (p50, RTTs)", value("establishment", "braid quic 1-rtt 20 ms RTT", "ready p50 in RTTs"), 1.5, atMost: true))
        rows.append(check("0-RTT response at 20 ms RTT in ~1 RTT (p50, RTTs)", value("establishment", "braid quic 0-rtt 20 ms RTT", "first byte p50 in RTTs"), 1.5, atMost: true))
        rows.append(check(
            "QUIC handshake CPU, client <= 1.2x a TLS 1.3 handshake over TCP",
            ratio(value("establishment", "braid quic 1-rtt loopback", "client cpu per handshake"),
                value("establishment", "raw tcp+tls1.3 (gnutls) loopback", "client cpu per handshake")), 1.2, atMost: true))
        // 1,000 connections in full mode, 200 in quick mode (`Establishment`).
        let quicRate = ["1000", "200"].lazy.compactMap { value("establishment", "braid quic \($0) connections", "new connections per second") }.first
        rows.append(check(
            "QUIC new connections per second to one listener >= raw TCP+TLS accept rate",
            ratio(quicRate, value("establishment", "raw tcp+tls1.3 1000 connections", "new connections per second")), 1, atMost: false))
        for side in ["server", "client"] {
            // 1,000 connections in full mode, 200 in quick mode (`Establishment`).
            let kibibytes = ["1000", "200"].lazy.compactMap { value("establishment", "braid quic \($0) connections", "\(side) memory per connection") }.first
            rows.append(checkKiB("QUIC idle connection, \(side) <= 32 KiB (resident memory)", kibibytes, 32))
        }
        // Braid TLS and TCP over the public API against the raw loops.
        let rawTLS = "raw tcp+tls1.3 (gnutls)"
        rows.append(check(
            "Braid TLS CPU per byte (both ends) <= 1.15x raw TCP+TLS",
            ratio(value("cpu", "braid tls", "cpu per byte, total"), value("cpu", rawTLS, "cpu per byte, total")), 1.15, atMost: true))
        rows.append(check(
            "Braid TLS goodput >= 0.9x raw TCP+TLS",
            ratio(value("throughput", "braid tls", "goodput median"), value("throughput", rawTLS, "goodput median")), 0.9, atMost: false))
        rows.append(check(
            "Braid TCP CPU per byte (both ends) <= 1.2x raw TCP",
            ratio(value("cpu", "braid tcp", "cpu per byte, total"), value("cpu", "raw tcp", "cpu per byte, total")), 1.2, atMost: true))
        rows.append(check(
            "Braid TLS time to ready on loopback (p50) <= 1.1x raw TCP+TLS",
            ratio(value("establishment", "braid tls loopback", "ready p50"), value("establishment", "\(rawTLS) loopback", "ready p50")), 1.1, atMost: true))
        rows.append(check(
            "Braid TLS new connections per second >= 0.9x raw TCP+TLS",
            ratio(value("establishment", "braid tls 1000 connections", "new connections per second"),
                value("establishment", "raw tcp+tls1.3 1000 connections", "new connections per second")), 0.9, atMost: false))
        // Plain UDP over the public API (rows in `cpu`).
        // Both paced at the same rate, which both receivers keep up with. Unpaced, Braid's
        // sender outruns its receiver (0.6 ns per byte sent against about 1.8 received), whose
        // socket drops most of the flood; its CPU per received byte then measures the overload,
        // and grows as the sender gets faster. The unpaced rows stay in the table.
        rows.append(check(
            "Braid UDP() with batch: CPU per byte (both ends) <= 0.5x raw one-datagram-per-call UDP (both paced at 1 Gbit/s)",
            ratio(value("cpu", CPUCost.pacedBraid, "cpu per byte, total"), value("cpu", CPUCost.pacedRaw, "cpu per byte, total")), 0.5, atMost: true))
        // The message framers (rows in `throughput`).
        rows.append(check(
            "TLV over TLS, 1 KiB messages: goodput >= 0.85x raw TCP+TLS moving the same bytes",
            ratio(value("throughput", FramerRows.configTLV(1024), "goodput median"), value("throughput", FramerRows.configRaw(1024), "goodput median")),
            0.85, atMost: false))
        // The target is "the framing adds at most 10%": measured without a transport
        // (both in this process), and, for what a user pays end to end, over TLS (two
        // processes, TLS and loopback TCP included) against the same in-process JSON.
        rows.append(check(
            "Coder JSON framing: CPU per message <= 1.1x JSONEncoder+JSONDecoder alone (both in-process, no transport)",
            ratio(value("throughput", FramerRows.configCoderFraming, "cpu per message, total"), value("throughput", FramerRows.configJSON, "cpu per message, total")),
            1.1, atMost: true))
        rows.append(check(
            "Coder JSON over TLS: CPU per message (both ends) <= 1.1x JSONEncoder+JSONDecoder alone (in-process)",
            ratio(value("throughput", FramerRows.configCoder, "cpu per message, total"), value("throughput", FramerRows.configJSON, "cpu per message, total")),
            1.1, atMost: true))
        // HTTP/3 (rows in `throughput`).
        rows.append(check(
            "HTTP/3 download goodput >= 1.5x ngtcp2's example pair (HTTP/3 both sides)",
            ratio(value("throughput", "braid http/3 download", "goodput median"), ngtcp2Goodput), 1.5, atMost: false))
        let requestCPU = value("throughput", "braid http/3 requests", "cpu per request, total")
        rows.append(requestCPU.map { ("HTTP/3 CPU per 1 KiB request (both ends) <= 20 us", String(format: "%.1f us", $0), $0 <= 20) }
            ?? ("HTTP/3 CPU per 1 KiB request (both ends) <= 20 us", "not measured in this run", nil))
        for side in ["server", "client"] {
            rows.append(checkKiB(
                "Braid TLS idle connection, \(side) <= 32 KiB (resident memory; kernel socket buffers are not in it)",
                value("establishment", "braid tls 1000 connections", "\(side) memory per connection"), 32))
        }
        return rows
    }

    private static func ratio(_ a: Double?, _ b: Double?) -> Double? {
        guard let a, let b, b > 0 else { return nil }
        return a / b
    }

    static func printTargets(_ results: Results) {
        emit("\nTargets")
        if Machine.build == "debug" { emit("  " + Machine.debugWarning) }
        for row in targets(results) {
            let verdict = row.met.map { $0 ? "met" : "MISSED" } ?? "-"
            emit("  \(verdict.padding(toLength: 7, withPad: " ", startingAt: 0)) \(row.measured.padding(toLength: 26, withPad: " ", startingAt: 0)) \(row.target)")
        }
        for note in results.allNotes { emit("  note: \(note)") }
    }

    static func writeJSON(_ results: Results, to path: String) throws {
        let object: [String: Any] = [
            "machine": Machine.description, "results": results.all.map(\.json), "notes": results.allNotes,
            "targets": targets(results).map { ["target": $0.target, "measured": $0.measured, "met": $0.met as Any] },
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: path))
        emit("wrote \(path)")
    }

    /// One horizontal bar chart per (scenario, metric) for the metrics that compare
    /// configurations.
    static func writeHTML(_ results: Results, to path: String) throws {
        let charted: [(scenario: String, metric: String, title: String)] = [
            ("throughput", "goodput median", "Goodput per configuration (Gbit/s, higher is better)"),
            ("cpu", "cpu per byte, total", "CPU per byte, both ends (ns/B, lower is better) against raw sockets"),
            ("syscalls", "client syscalls per MB", "Client syscalls per MB with and without batching (lower is better)"),
            ("syscalls", "server syscalls per MB", "Server syscalls per MB with and without batching (lower is better)"),
            ("establishment", "ready p50", "Time to ready, p50 (ms)"),
            ("establishment", "first byte p50", "Time to first response byte, p50 (ms)"),
        ]
        var body = "<p>\(legend)</p>\n"
        for chart in charted {
            let rows = results.all.filter { $0.scenario == chart.scenario && $0.metric == chart.metric }
            guard !rows.isEmpty else { continue }
            let bars = rows.map { row -> Bar in
                let spread = spread(of: row, in: results)
                return Bar(label: row.config, value: row.value, spread: spread, isBaseline: isBaseline(row.config))
            }
            // The attributes name what the chart shows, so tools/check-benchmark-report.py can
            // check the rendered page against the run's JSON.
            body += "<h2>\(escape(chart.title))</h2>\n<div class=\"chart\" data-scenario=\"\(escape(chart.scenario))\" "
                + "data-metric=\"\(escape(chart.metric))\" data-bars=\"\(bars.count)\">" + svgBars(bars, unit: rows[0].unit) + "</div>\n"
        }
        body += "<h2>Targets</h2>\n<table id=\"targets\">\n" + targets(results).map {
            "<tr><td>\($0.met.map { $0 ? "met" : "missed" } ?? "-")</td><td>\(escape($0.measured))</td><td>\(escape($0.target))</td></tr>"
        }.joined(separator: "\n") + "\n</table>\n"
        body += "<h2>All results</h2>\n<table id=\"results\">\n<tr><th>scenario</th><th>config</th><th>metric</th><th>value</th><th>unit</th></tr>\n"
            + results.all.map {
                "<tr><td>\(escape($0.scenario))</td><td>\(escape($0.config))</td><td>\(escape($0.metric))</td><td>\(format($0.value))</td><td>\(escape($0.unit))</td></tr>"
            }.joined(separator: "\n") + "\n</table>\n"
        let machine = Machine.description.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        let warning = Machine.build == "debug" ? "<p><strong>\(escape(Machine.debugWarning))</strong></p>" : ""
        let page = """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Braid benchmarks</title>
            \(style)
            </head><body><h1>Braid benchmarks</h1>\(warning)<p>\(escape(machine))</p>
            \(body)</body></html>
            """
        try page.write(toFile: path, atomically: true, encoding: .utf8)
        emit("wrote \(path)")
    }

    static let style = "<style>body{font:14px sans-serif;margin:2em;max-width:70em} td,th{padding:2px 8px;text-align:left} svg text{font:12px sans-serif} .apart{color:#b03030;font-weight:bold}</style>"

    static let legend = "<svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" fill=\"\(braidColour)\"/></svg> Braid "
        + "<svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" fill=\"\(baselineColour)\"/></svg> baselines (raw sockets, other stacks, the coders alone); "
        + "a line across a bar is the run's min–max."

    static let braidColour = "#4878a8"
    static let baselineColour = "#a0a0a0"

    /// What Braid is compared against, rather than Braid itself.
    static func isBaseline(_ config: String) -> Bool {
        let lowered = config.lowercased()
        return ["raw ", "ngtcp2", "picoquic", "quic-go", "jsonencoder", "aioquic"].contains { lowered.hasPrefix($0) }
    }

    /// A "<metric> median" row's min...max, when the run recorded them.
    private static func spread(of row: Measurement, in results: Results) -> ClosedRange<Double>? {
        guard row.metric.hasSuffix(" median") else { return nil }
        let base = row.metric.dropLast(" median".count)
        guard let low = results.value(row.scenario, row.config, "\(base) min"), let high = results.value(row.scenario, row.config, "\(base) max")
        else { return nil }
        return min(low, high)...max(low, high)
    }

    struct Bar {
        var label: String
        var value: Double
        var spread: ClosedRange<Double>?
        var isBaseline: Bool
    }

    /// Horizontal bars, Braid's and the baselines' in their own colours, each with its min–max.
    static func svgBars(_ rows: [Bar], unit: String) -> String {
        let barHeight = 22, labelWidth = 320, chartWidth = 420
        let largest = max(rows.map { $0.spread?.upperBound ?? $0.value }.max() ?? 1, 1e-12)
        func x(_ value: Double) -> Int { labelWidth + Int(Double(chartWidth) * value / largest) }
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(labelWidth + chartWidth + 180)\" height=\"\(rows.count * barHeight + 10)\">"
        for (index, row) in rows.enumerated() {
            let y = index * barHeight + 5
            let width = max(x(row.value) - labelWidth, 1)
            svg += "<text x=\"0\" y=\"\(y + 15)\">\(escape(row.label))</text>"
            svg += "<rect x=\"\(labelWidth)\" y=\"\(y)\" width=\"\(width)\" height=\"\(barHeight - 6)\" fill=\"\(row.isBaseline ? baselineColour : braidColour)\"/>"
            var text = "\(format(row.value)) \(escape(unit))"
            if let spread = row.spread {
                let middle = y + (barHeight - 6) / 2
                svg += "<line x1=\"\(x(spread.lowerBound))\" x2=\"\(x(spread.upperBound))\" y1=\"\(middle)\" y2=\"\(middle)\" stroke=\"black\" stroke-width=\"2\"/>"
                text += " (\(format(spread.lowerBound))–\(format(spread.upperBound)))"
            }
            svg += "<text x=\"\(max(x(row.value), x(row.spread?.upperBound ?? 0)) + 6)\" y=\"\(y + 15)\">\(text)</text>"
        }
        return svg + "</svg>"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
