"""Tests for benchmark-results.py, run as a subprocess on a small run's JSON in a temp dir.

Run from the repository root:
    python3 -m unittest discover -s tools -p 'test_check_benchmark_results.py'
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmark-results.py")

RUN = {
    "machine": {"cores": 2, "cpu": "Test CPU", "kernel": "6.1", "build": "release", "date": "2026-01-01T00:00:00Z",
                "command": "benchmarks --quick --json run.json", "load_average": "0.10 0.20 0.30"},
    "results": [
        {"scenario": "throughput", "config": "quic 1 stream", "metric": "goodput median", "value": 3.456, "unit": "Gbit/s"},
        {"scenario": "throughput", "config": "quic 1 stream", "metric": "goodput min", "value": 3.1, "unit": "Gbit/s"},
        {"scenario": "throughput", "config": "quic 1 stream", "metric": "goodput max", "value": 3.9, "unit": "Gbit/s"},
        {"scenario": "establishment", "config": "braid quic 200 connections", "metric": "server memory per connection",
         "value": 83.04, "unit": "KiB"},
        {"scenario": "cpu", "config": "raw tcp | odd", "metric": "cpu per byte, total", "value": 0.72, "unit": "ns/B"},
    ],
    "targets": [
        {"target": "QUIC goodput >= 2x", "measured": "1.50x", "met": False},
        {"target": "Syscalls <= 1/20", "measured": "0.01x", "met": True},
        {"target": "Not measured", "measured": "not measured in this run", "met": None},
    ],
    "notes": ["a row failed: the server received nothing"],
}

README = "# Project\n\nIntro.\n\n<!-- results:begin -->\nold table\n<!-- results:end -->\n\nAfter.\n"


class BenchmarkResultsTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.root = self.directory.name
        self.json = os.path.join(self.root, "run.json")
        self.results = os.path.join(self.root, "RESULTS.md")
        self.readme = os.path.join(self.root, "README.md")
        with open(self.json, "w") as file:
            json.dump(RUN, file)
        with open(self.readme, "w") as file:
            file.write(README)

    def tearDown(self):
        self.directory.cleanup()

    def run_script(self, *extra):
        return subprocess.run([sys.executable, SCRIPT, self.json, "--results", self.results, "--readme", self.readme, *extra],
                              capture_output=True, text=True, timeout=30)

    def read(self, path):
        with open(path) as file:
            return file.read()

    def test_writes_every_row_target_and_note(self):
        self.assertEqual(self.run_script().returncode, 0)
        page = self.read(self.results)
        self.assertIn("Command: `benchmarks --quick --json run.json`", page)
        self.assertIn("load average at the start: 0.10 0.20 0.30", page)
        self.assertIn("| QUIC goodput >= 2x | 1.50x | missed |", page)
        self.assertIn("| Syscalls <= 1/20 | 0.01x | met |", page)
        self.assertIn("| Not measured | not measured in this run | - |", page)
        self.assertIn("- a row failed: the server received nothing", page)
        self.assertIn("### throughput", page)
        self.assertIn("| quic 1 stream | goodput max | 3.90 Gbit/s |", page)
        # A pipe in a name does not break the table.
        self.assertIn("| raw tcp \\| odd | cpu per byte, total | 0.72 ns/B |", page)

    def test_headline_rows_show_the_median_with_its_range_and_skip_what_was_not_measured(self):
        self.run_script()
        page = self.read(self.results)
        self.assertIn("3.46 Gbit/s (3.10–3.90)", page)
        # Quick mode's 200-connection row stands in for the full mode's 1,000.
        self.assertIn("| Memory per idle connection, server / client: QUIC | 83.0 KiB / - |", page)
        self.assertNotIn("HTTP/3 download", page)

    def test_replaces_only_the_readme_block(self):
        self.run_script()
        readme = self.read(self.readme)
        self.assertTrue(readme.startswith("# Project\n\nIntro.\n\n<!-- results:begin -->\nMeasured with `benchmarks --quick --json run.json`"))
        self.assertTrue(readme.endswith("<!-- results:end -->\n\nAfter.\n"))
        self.assertNotIn("old table", readme)
        self.assertIn("Targets in that run: 1 met, 1 missed", readme)

    def test_check_reports_stale_files_and_writes_nothing(self):
        result = self.run_script("--check")
        self.assertEqual(result.returncode, 1)
        self.assertFalse(os.path.exists(self.results))
        self.assertIn("old table", self.read(self.readme))
        self.run_script()
        self.assertEqual(self.run_script("--check").returncode, 0)

    def test_a_readme_without_markers_is_refused(self):
        with open(self.readme, "w") as file:
            file.write("# No markers\n")
        result = self.run_script()
        self.assertEqual(result.returncode, 2)
        self.assertIn("markers", result.stderr)

    def test_a_file_that_is_not_a_run_is_refused(self):
        with open(self.json, "w") as file:
            json.dump({"rows": []}, file)
        result = self.run_script()
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a benchmark run", result.stderr)

    def write_run(self, name, date, scale, http3_met):
        run = json.loads(json.dumps(RUN))
        run["machine"]["date"] = date
        for row in run["results"]:
            row["value"] *= scale
        run["targets"].append({"target": "HTTP/3 CPU per 1 KiB request <= 20 us", "measured": f"{19 * scale:.1f} us",
                               "met": http3_met})
        path = os.path.join(self.root, name)
        with open(path, "w") as file:
            json.dump(run, file)
        return path

    def test_several_runs_give_a_column_each_in_date_order_and_a_verdict_counted_over_runs(self):
        late = self.write_run("late.json", "2026-01-03T00:00:00Z", 2.0, False)
        early = self.write_run("early.json", "2026-01-01T00:00:00Z", 1.0, True)
        middle = self.write_run("middle.json", "2026-01-02T00:00:00Z", 1.5, True)
        result = subprocess.run([sys.executable, SCRIPT, late, early, middle, "--results", self.results,
                                 "--readme", self.readme], capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        page = self.read(self.results)
        self.assertIn("from `early.json`, `middle.json`, `late.json`, the JSON of 3 runs", page)
        self.assertIn("| HTTP/3 CPU per 1 KiB request <= 20 us | 19.0 us | 28.5 us | 38.0 us | met in 2 of 3 |", page)
        self.assertIn("| QUIC goodput >= 2x | 1.50x | 1.50x | 1.50x | missed in all 3 |", page)
        self.assertIn("| Syscalls <= 1/20 | 0.01x | 0.01x | 0.01x | met in all 3 |", page)
        self.assertIn("| quic 1 stream | goodput max | 3.90 Gbit/s | 5.85 Gbit/s | 7.80 Gbit/s |", page)
        # A headline cell is the median of the runs with their range.
        self.assertIn("5.18 Gbit/s (3.46–6.91)", page)
        readme = self.read(self.readme)
        self.assertIn("3 runs (2026-01-01T00:00:00Z, 2026-01-02T00:00:00Z, 2026-01-03T00:00:00Z", readme)
        self.assertIn("| HTTP/3 CPU per 1 KiB request <= 20 us | 19.0 us | 28.5 us | 38.0 us | met in 2 of 3 |", readme)
        self.assertNotIn("QUIC goodput >= 2x", readme)
        self.assertIn("Targets across the 3 runs: 1 met in every run, 2 missed in at least one", readme)

    def test_one_run_shows_its_per_message_targets_in_the_readme(self):
        path = self.write_run("one.json", "2026-01-01T00:00:00Z", 1.0, True)
        subprocess.run([sys.executable, SCRIPT, path, "--results", self.results, "--readme", self.readme],
                       capture_output=True, text=True, timeout=30, check=True)
        self.assertIn("| HTTP/3 CPU per 1 KiB request <= 20 us | 19.0 us | met |", self.read(self.readme))


if __name__ == "__main__":
    unittest.main()
