"""Tests for check-benchmark-report.py: pages in the benchmark report's format, loaded in headless
Chromium. They need Debian's `chromium` (tools/install-deps.sh --benchmarks), so the benchmark
command runs them (tools/run-benchmarks.sh) rather than the test command.

Run from the repository root:
    python3 -m unittest discover -s tools -p 'test_report_in_chromium.py'
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-benchmark-report.py")


def chart(scenario, metric, labels):
    bars = "".join(
        f'<text x="0" y="{20 * i + 15}">{label}</text><rect x="320" y="{20 * i}" width="{10 + i}" height="16" fill="#4878a8"/>'
        f'<text x="340" y="{20 * i + 15}">1.0 Gbit/s</text>'
        for i, label in enumerate(labels))
    return (f'<h2>{metric} ({scenario})</h2>\n<div class="chart" data-scenario="{scenario}" data-metric="{metric}" '
            f'data-bars="{len(labels)}"><svg xmlns="http://www.w3.org/2000/svg" width="900" height="{20 * len(labels) + 10}">{bars}</svg></div>\n')


def page(body_charts, extra="", targets=2, results=3):
    target_rows = "".join(f"<tr><td>met</td><td>1.0x</td><td>target {i}</td></tr>" for i in range(targets))
    result_rows = "".join(f"<tr><td>throughput</td><td>quic {i}</td><td>goodput median</td><td>1.0</td><td>Gbit/s</td></tr>"
                          for i in range(results))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Braid benchmarks</title></head><body><h1>Braid benchmarks</h1><p>cores: 2</p>
{body_charts}<h2>Targets</h2>
<table id="targets">
{target_rows}
</table>
<h2>All results</h2>
<table id="results">
<tr><th>scenario</th><th>config</th><th>metric</th><th>value</th><th>unit</th></tr>
{result_rows}
</table>
{extra}</body></html>"""


RUN = {
    "results": [{"scenario": "throughput", "config": f"quic {i}", "metric": "goodput median", "value": 1.0, "unit": "Gbit/s"}
                for i in range(3)],
    "targets": [{"target": f"target {i}", "measured": "1.0x", "met": True} for i in range(2)],
}


class ReportInChromiumTests(unittest.TestCase):
    def setUp(self):
        # Not skipped without a browser: these tests are the check, so they fail instead.
        self.assertIsNotNone(shutil.which("chromium"), "needs Debian's chromium: tools/install-deps.sh --benchmarks")
        self.directory = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.directory.cleanup()

    def check(self, html, run=None):
        report = os.path.join(self.directory.name, "report.html")
        with open(report, "w") as file:
            file.write(html)
        command = [sys.executable, CHECKER, report]
        if run is not None:
            path = os.path.join(self.directory.name, "run.json")
            with open(path, "w") as file:
                json.dump(run, file)
            command += ["--json", path]
        result = subprocess.run(command, capture_output=True, text=True, timeout=180)
        return result.returncode, result.stdout + result.stderr

    def test_a_report_in_the_suites_format_passes(self):
        status, output = self.check(page(chart("throughput", "goodput median", ["quic 0", "quic 1", "quic 2"])), RUN)
        self.assertEqual(status, 0, output)
        self.assertIn("1 charts, 2 targets, 3 result rows", output)

    def test_a_script_error_fails(self):
        broken = page(chart("throughput", "goodput median", ["quic 0", "quic 1", "quic 2"]),
                      extra="<script>document.body.appendChild(missingVariable);</script>")
        status, output = self.check(broken)
        self.assertEqual(status, 1, output)
        self.assertIn("missingVariable", output)

    def test_a_chart_missing_its_bars_fails(self):
        status, output = self.check(page(chart("throughput", "goodput median", ["quic 0", "quic 1", "quic 2"]).replace("<rect", "<circle", 1)))
        self.assertEqual(status, 1, output)
        self.assertIn("2 bars drawn, 3 expected", output)

    def test_a_heading_without_its_chart_fails(self):
        status, output = self.check(page("<h2>Goodput per configuration</h2>\n" + chart("cpu", "cpu per byte, total", ["raw tcp"])))
        self.assertEqual(status, 1, output)
        self.assertIn("'Goodput per configuration' has no chart after it", output)

    def test_charts_and_tables_are_checked_against_the_run(self):
        status, output = self.check(page(chart("throughput", "goodput median", ["quic 0", "quic 1"]), results=2), RUN)
        self.assertEqual(status, 1, output)
        self.assertIn("2 bars, but the run recorded 3 rows", output)
        self.assertIn("table#results has 3 rows, the run 3 results", output)

    def test_a_page_without_tables_fails(self):
        html = page(chart("throughput", "goodput median", ["quic 0"]))
        html = html[:html.index("<h2>Targets</h2>")] + "</body></html>"
        status, output = self.check(html)
        self.assertEqual(status, 1, output)
        self.assertIn("no table#targets", output)
        self.assertIn("no table#results", output)


if __name__ == "__main__":
    unittest.main()
