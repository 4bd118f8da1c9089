import Foundation

/// Two runs of the benchmark suite side by side (`benchmarks compare A.json B.json`): each row
/// measured in both, with B's value as a ratio of A's and both runs' spreads.
///
/// A row is one quantity: a scenario, a configuration and a metric. Repeated measurements are
/// recorded as "<metric> median", "<metric> min" and "<metric> max"; they make one row whose
/// value is the median and whose spread is min...max. Other metrics are rows of one value with
/// no spread. Where both runs have a spread and the spreads do not overlap, the row is flagged:
/// the difference is larger than the run-to-run noise each run showed.
package struct BenchmarkComparison: Sendable {
    /// One measured quantity in one run.
    package struct Value: Sendable, Equatable {
        package var value: Double
        /// min...max over the run's repetitions; nil for a single measurement.
        package var spread: ClosedRange<Double>?

        package init(value: Double, spread: ClosedRange<Double>? = nil) {
            self.value = value
            self.spread = spread
        }
    }

    package struct Row: Sendable {
        package var scenario: String
        package var config: String
        package var metric: String
        package var unit: String
        package var a: Value
        package var b: Value

        /// B's value over A's (nil when A's is zero).
        package var ratio: Double? { a.value == 0 ? nil : b.value / a.value }

        /// Both runs have a spread and the spreads do not overlap.
        package var spreadsApart: Bool {
            guard let first = a.spread, let second = b.spread else { return false }
            return !first.overlaps(second)
        }
    }

    package var rows: [Row]
    /// Rows only one of the runs measured, as "scenario / config / metric".
    package var onlyInA: [String]
    package var onlyInB: [String]

    /// Reads two JSON files written by `benchmarks --json`.
    package init(a: URL, b: URL) throws {
        self.init(a: try Self.measurements(in: a), b: try Self.measurements(in: b))
    }

    /// Compares two runs' measurements: (scenario, config, metric, value, unit) each.
    package init(a: [Measured], b: [Measured]) {
        let first = Self.quantities(a)
        let second = Self.quantities(b)
        rows = first.keys.filter { second[$0] != nil }.sorted().map { key in
            Row(scenario: key.scenario, config: key.config, metric: key.metric, unit: first[key]!.unit, a: first[key]!.value, b: second[key]!.value)
        }
        onlyInA = first.keys.filter { second[$0] == nil }.sorted().map(\.description)
        onlyInB = second.keys.filter { first[$0] == nil }.sorted().map(\.description)
    }

    /// One line of a run's results.
    package struct Measured: Sendable {
        package var scenario: String
        package var config: String
        package var metric: String
        package var value: Double
        package var unit: String

        package init(scenario: String, config: String, metric: String, value: Double, unit: String) {
            self.scenario = scenario
            self.config = config
            self.metric = metric
            self.value = value
            self.unit = unit
        }
    }

    /// The measurements in a `benchmarks --json` file; throws naming the file when it is not one.
    package static func measurements(in file: URL) throws -> [Measured] {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw ApplicationFailure("cannot read \(file.path): \(error.localizedDescription)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let results = object["results"] as? [[String: Any]]
        else { throw ApplicationFailure("\(file.path) is not a results file written by `benchmarks --json` (no \"results\" list)") }
        return try results.enumerated().map { index, row in
            guard let scenario = row["scenario"] as? String, let config = row["config"] as? String, let metric = row["metric"] as? String,
                let value = (row["value"] as? NSNumber)?.doubleValue, let unit = row["unit"] as? String
            else { throw ApplicationFailure("\(file.path): result \(index) lacks scenario, config, metric, value or unit") }
            return Measured(scenario: scenario, config: config, metric: metric, value: value, unit: unit)
        }
    }

    private struct Key: Hashable, Comparable, CustomStringConvertible {
        var scenario: String
        var config: String
        var metric: String

        static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.scenario, lhs.config, lhs.metric) < (rhs.scenario, rhs.config, rhs.metric)
        }

        var description: String { "\(scenario) / \(config) / \(metric)" }
    }

    private static let spreadSuffixes = [" median", " min", " max"]

    /// Folds "<metric> median/min/max" into one quantity per metric; the last value of a key
    /// wins, as in the run's own report.
    private static func quantities(_ measurements: [Measured]) -> [Key: (value: Value, unit: String)] {
        var plain: [Key: (Double, String)] = [:]
        var repeated: [Key: (median: Double?, min: Double?, max: Double?, unit: String)] = [:]
        for measurement in measurements {
            if let suffix = spreadSuffixes.first(where: { measurement.metric.hasSuffix($0) }) {
                let key = Key(scenario: measurement.scenario, config: measurement.config, metric: String(measurement.metric.dropLast(suffix.count)))
                var entry = repeated[key] ?? (nil, nil, nil, measurement.unit)
                switch suffix {
                case " median": entry.median = measurement.value
                case " min": entry.min = measurement.value
                default: entry.max = measurement.value
                }
                repeated[key] = entry
            } else {
                plain[Key(scenario: measurement.scenario, config: measurement.config, metric: measurement.metric)] = (measurement.value, measurement.unit)
            }
        }
        var result: [Key: (value: Value, unit: String)] = plain.mapValues { (Value(value: $0.0, spread: nil), $0.1) }
        for (key, entry) in repeated {
            if let median = entry.median {
                let spread = entry.min.flatMap { low in entry.max.map { high in min(low, high)...max(low, high) } }
                result[Key(scenario: key.scenario, config: key.config, metric: key.metric + " median")] = (Value(value: median, spread: spread), entry.unit)
            } else {
                // min or max without a median (a latency row's "min"/"max"): values of their own.
                for (suffix, value) in [(" min", entry.min), (" max", entry.max)] {
                    if let value {
                        result[Key(scenario: key.scenario, config: key.config, metric: key.metric + suffix)] = (Value(value: value, spread: nil), entry.unit)
                    }
                }
            }
        }
        return result
    }
}
