import BraidPerf
import Foundation
import Testing

/// `benchmarks compare`: rows folded from a run's median/min/max lines, ratios, and the flag
/// for spreads that do not overlap.
@Suite struct BenchmarkComparisonTests {
    private func row(_ config: String, _ metric: String, _ value: Double, scenario: String = "throughput") -> BenchmarkComparison.Measured {
        BenchmarkComparison.Measured(scenario: scenario, config: config, metric: metric, value: value, unit: "Gbit/s")
    }

    @Test func repeatedRowsFoldIntoOneWithTheirSpread() throws {
        let a = [row("quic", "goodput median", 4), row("quic", "goodput min", 3.5), row("quic", "goodput max", 4.2),
                 row("raw tcp", "goodput median", 10), row("raw tcp", "goodput min", 9), row("raw tcp", "goodput max", 11)]
        let b = [row("quic", "goodput median", 5), row("quic", "goodput min", 4.5), row("quic", "goodput max", 5.5),
                 row("raw tcp", "goodput median", 10.5), row("raw tcp", "goodput min", 10), row("raw tcp", "goodput max", 12)]
        let comparison = BenchmarkComparison(a: a, b: b)
        #expect(comparison.rows.map(\.config) == ["quic", "raw tcp"])
        let quic = comparison.rows[0]
        #expect(quic.metric == "goodput median")
        #expect(quic.a == BenchmarkComparison.Value(value: 4, spread: 3.5...4.2))
        #expect(quic.ratio == 1.25)
        #expect(quic.spreadsApart)
        #expect(!comparison.rows[1].spreadsApart)  // 9–11 and 10–12 overlap
        #expect(comparison.onlyInA.isEmpty && comparison.onlyInB.isEmpty)
    }

    @Test func singleValuesAndLatencyExtremesAreRowsWithoutSpread() {
        let a = [row("tls", "cpu per byte, total", 2), row("tls", "ready min", 0.5, scenario: "establishment"),
                 row("tls", "ready p50", 1, scenario: "establishment"), row("old", "gone", 1)]
        let b = [row("tls", "cpu per byte, total", 3), row("tls", "ready min", 0.25, scenario: "establishment"),
                 row("tls", "ready p50", 1, scenario: "establishment"), row("new", "added", 1)]
        let comparison = BenchmarkComparison(a: a, b: b)
        #expect(comparison.rows.map(\.metric) == ["ready min", "ready p50", "cpu per byte, total"])
        #expect(comparison.rows.allSatisfy { $0.a.spread == nil && !$0.spreadsApart })
        #expect(comparison.rows[0].ratio == 0.5)
        #expect(comparison.rows[2].ratio == 1.5)
        #expect(comparison.onlyInA == ["throughput / old / gone"])
        #expect(comparison.onlyInB == ["throughput / new / added"])
    }

    @Test func filesThatAreNotResultsAreRefusedByName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-compare-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good.json")
        try Data(#"{"results": [{"scenario": "cpu", "config": "braid tls", "metric": "cpu per byte, total", "value": 1.5, "unit": "ns/B"}]}"#.utf8)
            .write(to: good)
        let bad = directory.appendingPathComponent("bad.json")
        try Data(#"{"rows": []}"#.utf8).write(to: bad)
        let comparison = try BenchmarkComparison(a: good, b: good)
        #expect(comparison.rows.count == 1 && comparison.rows[0].ratio == 1)
        #expect(throws: ApplicationFailure.self) { try BenchmarkComparison(a: good, b: bad) }
        #expect(throws: ApplicationFailure.self) { try BenchmarkComparison(a: directory.appendingPathComponent("missing.json"), b: good) }
    }
}
