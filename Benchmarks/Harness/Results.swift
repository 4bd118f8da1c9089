import Foundation
import Histogram
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One number the suite measured.
struct Measurement: Sendable {
    var scenario: String
    var config: String
    var metric: String
    var value: Double
    var unit: String

    var json: [String: Any] { ["scenario": scenario, "config": config, "metric": metric, "value": value, "unit": unit] }
}

/// Everything measured in a run, printed as it arrives.
final class Results: Sendable {
    private let measurements = Mutex<[Measurement]>([])
    private let notes = Mutex<[String]>([])

    var all: [Measurement] { measurements.withLock { $0 } }
    var allNotes: [String] { notes.withLock { $0 } }

    func record(_ scenario: String, _ config: String, _ metric: String, _ value: Double, _ unit: String) {
        let measurement = Measurement(scenario: scenario, config: config, metric: metric, value: value, unit: unit)
        measurements.withLock { $0.append(measurement) }
        emit("  \(config.padding(toLength: 34, withPad: " ", startingAt: 0)) \(metric.padding(toLength: 32, withPad: " ", startingAt: 0)) \(format(value)) \(unit)")
    }

    /// Something the reader should know: a row that could not be measured, and why.
    func note(_ text: String) {
        notes.withLock { $0.append(text) }
        emit("  note: \(text)")
    }

    /// Latency samples in nanoseconds: min, p50, p90, p99 and max in milliseconds, with the
    /// percentiles from an HdrHistogram (microsecond resolution, 3 significant digits).
    func recordLatencies(_ scenario: String, _ config: String, _ metric: String, nanoseconds: [UInt64], rtt: Double? = nil) {
        guard !nanoseconds.isEmpty else { return }
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        for sample in nanoseconds { _ = histogram.record(max(1, sample / 1000)) }
        let values: [(String, Double)] = [
            ("min", Double(nanoseconds.min()!) / 1e6),
            ("p50", Double(histogram.valueAtPercentile(50)) / 1e3),
            ("p90", Double(histogram.valueAtPercentile(90)) / 1e3),
            ("p99", Double(histogram.valueAtPercentile(99)) / 1e3),
            ("max", Double(nanoseconds.max()!) / 1e6),
        ]
        for (name, milliseconds) in values {
            record(scenario, config, "\(metric) \(name)", milliseconds, "ms")
        }
        if let rtt {
            record(scenario, config, "\(metric) p50 in RTTs", values[1].1 / rtt, "RTT")
        }
    }

    /// Repeated runs of one quantity: min, median and max.
    func recordRepeated(_ scenario: String, _ config: String, _ metric: String, _ values: [Double], _ unit: String) {
        guard !values.isEmpty else { return }
        let sorted = values.sorted()
        record(scenario, config, "\(metric) median", sorted[sorted.count / 2], unit)
        if values.count > 1 {
            record(scenario, config, "\(metric) min", sorted.first!, unit)
            record(scenario, config, "\(metric) max", sorted.last!, unit)
        }
    }

    func value(_ scenario: String, _ config: String, _ metric: String) -> Double? {
        all.last { $0.scenario == scenario && $0.config == config && $0.metric == metric }?.value
    }
}

func format(_ value: Double) -> String {
    if value == 0 { return "0" }
    if abs(value) >= 1000 { return String(format: "%.0f", value) }
    if abs(value) >= 10 { return String(format: "%.1f", value) }
    if abs(value) >= 0.1 { return String(format: "%.3f", value) }
    return String(format: "%.4f", value)
}

/// What the results were measured on.
enum Machine {
    /// How this binary was built. A debug build runs several times slower, so its figures say
    /// nothing about Braid; the reports record it and the suite says so at the start and end.
    static var build: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }

    static let debugWarning = "WARNING: this is a DEBUG build of the benchmarks, several times slower than a release build: "
        + "its figures are not Braid's. Run `swift run -c release benchmarks` (or tools/run-benchmarks.sh)."

    /// The 1, 5 and 15 minute load averages when the run started (the first use of
    /// `description`, in its first line of output): what else ran shows there, and a shared
    /// machine's figures mean little without it.
    static let loadAtStart = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
        .split(separator: " ").prefix(3).joined(separator: " ") ?? "unknown"

    static var description: [String: Any] {
        var system = utsname()
        uname(&system)
        let kernel = withUnsafeBytes(of: system.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let cpuInfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuInfo.split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        return [
            "command": (["benchmarks"] + CommandLine.arguments.dropFirst()).joined(separator: " "),
            "load_average": loadAtStart,
            "cores": sysconf(Int32(_SC_NPROCESSORS_ONLN)),
            "memory_bytes": Int(sysconf(Int32(_SC_PHYS_PAGES))) * Int(sysconf(Int32(_SC_PAGESIZE))),
            "kernel": kernel, "cpu": model, "date": ISO8601DateFormatter().string(from: Date()),
            "build": build,
        ]
    }
}

/// Writes a line to standard output at once (progress must show while a scenario runs, and
/// child processes write to their own files).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
