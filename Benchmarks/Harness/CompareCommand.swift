import ArgumentParser
import BraidPerf
import Foundation

/// `benchmarks compare A.json B.json`: two runs side by side, each row's B/A ratio with both
/// runs' min–max, rows whose spreads do not overlap flagged; the same as HTML with `--html`.
struct CompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "benchmarks compare",
        abstract: "Compare two runs written by `benchmarks --json`: B/A per row, flagging rows whose min–max ranges do not overlap.")

    @Argument(help: "The first run (A), a file written by `benchmarks --json`.") var a: String
    @Argument(help: "The second run (B).") var b: String
    @Option(help: "Also write the comparison as HTML to this file.") var html: String?

    func run() throws {
        let comparison = try BenchmarkComparison(a: URL(fileURLWithPath: a), b: URL(fileURLWithPath: b))
        guard !comparison.rows.isEmpty else { throw ValidationError("\(a) and \(b) have no row in common") }
        print("A: \(a)\nB: \(b)\n")
        print("\(pad("scenario / config / metric", 78)) \(pad("A (min–max)", 26)) \(pad("B (min–max)", 26)) B/A")
        for row in comparison.rows {
            let name = "\(row.scenario) / \(row.config) / \(row.metric)"
            let ratio = row.ratio.map { String(format: "%.2fx", $0) } ?? "-"
            print("\(pad(name, 78)) \(pad(Self.describe(row.a, row.unit), 26)) \(pad(Self.describe(row.b, row.unit), 26)) \(ratio)\(row.spreadsApart ? "  ranges apart" : "")")
        }
        let apart = comparison.rows.filter(\.spreadsApart).count
        print("\n\(comparison.rows.count) rows in both runs; \(apart) with min–max ranges that do not overlap.")
        for (label, names) in [("only in A", comparison.onlyInA), ("only in B", comparison.onlyInB)] where !names.isEmpty {
            print("\(label): \(names.count) rows (\(names.prefix(5).joined(separator: "; "))\(names.count > 5 ? "; ..." : ""))")
        }
        if let html { try writeHTML(comparison, to: html) }
    }

    static func describe(_ value: BenchmarkComparison.Value, _ unit: String) -> String {
        let spread = value.spread.map { " (\(format($0.lowerBound))–\(format($0.upperBound)))" } ?? ""
        return "\(format(value.value)) \(unit)\(spread)"
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text.padding(toLength: width, withPad: " ", startingAt: 0)
    }

    /// One chart per (scenario, metric): A's bar above B's for each configuration.
    private func writeHTML(_ comparison: BenchmarkComparison, to path: String) throws {
        var body = "<p>A: \(Report.escape(a))<br>B: \(Report.escape(b))</p>\n<p>\(Report.legend)</p>\n"
        let groups = Dictionary(grouping: comparison.rows) { "\($0.scenario) / \($0.metric)" }
        for name in groups.keys.sorted() {
            let rows = groups[name]!
            let bars = rows.flatMap { row in
                [
                    Report.Bar(label: "A \(row.config)", value: row.a.value, spread: row.a.spread, isBaseline: Report.isBaseline(row.config)),
                    Report.Bar(label: "B \(row.config)", value: row.b.value, spread: row.b.spread, isBaseline: Report.isBaseline(row.config)),
                ]
            }
            body += "<h2>\(Report.escape(name))</h2>\n" + Report.svgBars(bars, unit: rows[0].unit) + "\n"
        }
        body += "<h2>All rows</h2>\n<table>\n<tr><th>scenario</th><th>config</th><th>metric</th><th>A</th><th>B</th><th>B/A</th><th></th></tr>\n"
            + comparison.rows.map { row in
                let ratio = row.ratio.map { String(format: "%.2fx", $0) } ?? "-"
                let cells = [row.scenario, row.config, row.metric, Self.describe(row.a, row.unit), Self.describe(row.b, row.unit), ratio].map { "<td>\(Report.escape($0))</td>" }
                return "<tr>\(cells.joined())<td class=\"apart\">\(row.spreadsApart ? "ranges apart" : "")</td></tr>"
            }.joined(separator: "\n") + "\n</table>\n"
        let page = """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>Braid benchmarks: A against B</title>
            \(Report.style)
            </head><body><h1>Braid benchmarks: A against B</h1>
            \(body)</body></html>
            """
        try page.write(toFile: path, atomically: true, encoding: .utf8)
        print("wrote \(path)")
    }
}
