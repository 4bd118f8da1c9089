#!/usr/bin/env python3
"""Writes Benchmarks/RESULTS.md, and the README's results table, from a benchmark run's JSON.

The figures in the repository's prose come from a run, not from typing: run the suite with
`--json FILE` (tools/run-benchmarks.sh --json out.json, or `benchmarks --json out.json`), then

    tools/benchmark-results.py out.json

rewrites Benchmarks/RESULTS.md whole (the machine, the command, the headline rows, every target
with its verdict, the notes, and every row grouped by scenario) and the table between the
`<!-- results:begin -->` and `<!-- results:end -->` markers of README.md. `--check` writes
nothing and exits 1 when either file differs from what the JSON gives (for CI, once a run's
JSON is kept beside them).

Usage: tools/benchmark-results.py RUN.json [--results PATH] [--readme PATH | --no-readme] [--check]
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"

# The headline rows: (what, [(label, scenario, config, metric), ...]). A row's cells are
# joined with " / "; a cell the run did not measure shows "-".
HEADLINE = [
    ("QUIC goodput, 1 stream / 64 streams / ngtcp2's example pair", [
        ("", "throughput", "quic 1 stream", "goodput median"),
        ("", "throughput", "quic 64 streams", "goodput median"),
        ("", "throughput", "ngtcp2 examples (gnutls), 1 stream", "goodput median"),
    ]),
    ("TLS goodput: Braid TLS / raw GnuTLS loop", [
        ("", "throughput", "braid tls", "goodput median"),
        ("", "throughput", "raw tcp+tls1.3 (gnutls)", "goodput median"),
    ]),
    ("CPU per byte, both ends: Braid QUIC / Braid TLS / raw TCP+TLS", [
        ("", "cpu", "braid quic stream", "cpu per byte, total"),
        ("", "cpu", "braid tls", "cpu per byte, total"),
        ("", "cpu", "raw tcp+tls1.3 (gnutls)", "cpu per byte, total"),
    ]),
    ("CPU per byte, both ends: Braid TCP / raw TCP", [
        ("", "cpu", "braid tcp", "cpu per byte, total"),
        ("", "cpu", "raw tcp", "cpu per byte, total"),
    ]),
    ("Ready p50, loopback: Braid QUIC / Braid TLS / raw TCP+TLS", [
        ("", "establishment", "braid quic 1-rtt loopback", "ready p50"),
        ("", "establishment", "braid tls loopback", "ready p50"),
        ("", "establishment", "raw tcp+tls1.3 (gnutls) loopback", "ready p50"),
    ]),
    ("At 20 ms RTT: QUIC ready / 0-RTT response (p50)", [
        ("", "establishment", "braid quic 1-rtt 20 ms RTT", "ready p50 in RTTs"),
        ("", "establishment", "braid quic 0-rtt 20 ms RTT", "first byte p50 in RTTs"),
    ]),
    ("Syscalls per MB, QUIC download client: batching on / off", [
        ("", "syscalls", "quic bulk, all batching on", "client syscalls per MB"),
        ("", "syscalls", "quic bulk, all batching off", "client syscalls per MB"),
    ]),
    ("Memory per idle connection, server / client: QUIC", [
        ("", "establishment", "braid quic 1000 connections", "server memory per connection"),
        ("", "establishment", "braid quic 1000 connections", "client memory per connection"),
    ]),
    ("Memory per idle connection, server / client: TLS", [
        ("", "establishment", "braid tls 1000 connections", "server memory per connection"),
        ("", "establishment", "braid tls 1000 connections", "client memory per connection"),
    ]),
    ("HTTP/3 download: Braid / ngtcp2's example pair", [
        ("", "throughput", "braid http/3 download", "goodput median"),
        ("", "throughput", "ngtcp2 examples (gnutls), 1 stream", "goodput median"),
    ]),
    ("HTTP/3 1 KiB requests: per second / CPU per request, both ends", [
        ("", "throughput", "braid http/3 requests", "requests per second median"),
        ("", "throughput", "braid http/3 requests", "cpu per request, total"),
    ]),
    ("TLV over TLS, messages per second: 100 B / 1 KiB", [
        ("", "throughput", "braid tlv over tls, 100 B msgs", "messages per second median"),
        ("", "throughput", "braid tlv over tls, 1 KiB msgs", "messages per second median"),
    ]),
    ("WebSocket over TLS echo, 1 KiB: Braid / Python websockets (messages per second)", [
        ("", "stacks", "braid wss echo, 1 KiB msgs", "messages per second median"),
        ("", "stacks", "python websockets echo, 1 KiB", "messages per second median"),
    ]),
    ("Datagram echo goodput, 1,150 B: DTLS / QUIC / UDP", [
        ("", "stacks", "braid dtls datagrams 1150 B (echo)", "goodput median"),
        ("", "throughput", "quic datagrams 1150 B (echo)", "goodput median"),
        ("", "stacks", "braid udp datagrams 1150 B (echo)", "goodput median"),
    ]),
    ("Sans-IO QUIC engine in memory, bulk goodput", [
        ("", "engine", "in-memory bulk, 1 stream, 64 MB", "goodput"),
    ]),
]

# Rows recorded in full mode under one name and in quick mode under another.
ALIASES = {"braid quic 1000 connections": ["braid quic 1000 connections", "braid quic 200 connections"]}


def number(value: float) -> str:
    """As the suite prints: three significant figures or so, thousands separated."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.4f}"


class Run:
    def __init__(self, data: dict):
        self.data = data
        self.machine = data.get("machine", {})
        self.rows = data.get("results", [])
        self.index = {}
        for row in self.rows:
            self.index[(row["scenario"], row["config"], row["metric"])] = row

    def find(self, scenario: str, config: str, metric: str):
        for name in ALIASES.get(config, [config]):
            row = self.index.get((scenario, name, metric))
            if row is not None:
                return row
        return None

    def cell(self, scenario: str, config: str, metric: str) -> str:
        row = self.find(scenario, config, metric)
        if row is None:
            return "-"
        text = f"{number(row['value'])} {row['unit']}"
        if metric.endswith(" median"):
            base = metric[: -len(" median")]
            low = self.find(scenario, row["config"], base + " min")
            high = self.find(scenario, row["config"], base + " max")
            if low is not None and high is not None:
                text += f" ({number(low['value'])}–{number(high['value'])})"
        return text

    def command(self) -> str:
        return self.machine.get("command") or "benchmarks (the command line was not recorded in this run's JSON)"

    def machine_line(self) -> str:
        parts = []
        for key, label in [("cores", "cores"), ("cpu", "CPU"), ("kernel", "kernel"), ("build", "build"),
                           ("load_average", "load average at the start"), ("date", "date")]:
            if key in self.machine:
                parts.append(f"{label}: {self.machine[key]}")
        if "memory_bytes" in self.machine:
            parts.append(f"memory: {self.machine['memory_bytes'] / 2**30:.1f} GiB")
        return "; ".join(parts) or "not recorded"


def escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def headline_table(run: Run) -> list[str]:
    lines = ["| Row | Measured |", "|---|---|"]
    for label, cells in HEADLINE:
        values = [run.cell(scenario, config, metric) for _, scenario, config, metric in cells]
        if all(value == "-" for value in values):
            continue
        lines.append(f"| {escape(label)} | {escape(' / '.join(values))} |")
    return lines


def targets_table(run: Run) -> list[str]:
    targets = run.data.get("targets", [])
    if not targets:
        return ["The run recorded no targets."]
    lines = ["| Target | Measured | |", "|---|---|---|"]
    for target in targets:
        met = target.get("met")
        verdict = "met" if met is True else "missed" if met is False else "-"
        lines.append(f"| {escape(target['target'])} | {escape(target['measured'])} | {verdict} |")
    return lines


def readme_block(run: Run) -> str:
    met = sum(1 for target in run.data.get("targets", []) if target.get("met") is True)
    missed = sum(1 for target in run.data.get("targets", []) if target.get("met") is False)
    lines = [
        BEGIN,
        f"Measured with `{run.command()}` ({run.machine_line()}). Median of the run's rounds, "
        "with their min–max where repeated; a shared machine's speed drifts, so compare within a run.",
        "",
        *headline_table(run),
        "",
        f"Targets in that run: {met} met, {missed} missed (each one, with its ratio, in `Benchmarks/RESULTS.md`).",
        END,
    ]
    return "\n".join(lines)


def results_page(run: Run, source: str) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `tools/benchmark-results.py` from `{source}`, the JSON of one run of the benchmark "
        "suite; do not edit by hand (run the suite with `--json FILE` and the script again). "
        "`docs/benchmarks.md` says what each scenario measures and how to read it.",
        "",
        f"- Command: `{run.command()}`",
        f"- Machine: {run.machine_line()}",
        "",
        "## Headline",
        "",
        *headline_table(run),
        "",
        "## Targets",
        "",
        "The suite prints these at the end of each run; they are never asserted in tests.",
        "",
        *targets_table(run),
        "",
    ]
    notes = run.data.get("notes", [])
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    lines += ["## Every row", ""]
    scenarios = []
    for row in run.rows:
        if row["scenario"] not in scenarios:
            scenarios.append(row["scenario"])
    for scenario in scenarios:
        lines += [f"### {scenario}", "", "| Configuration | Metric | Value |", "|---|---|---|"]
        for row in run.rows:
            if row["scenario"] == scenario:
                lines.append(f"| {escape(row['config'])} | {escape(row['metric'])} | {number(row['value'])} {escape(row['unit'])} |")
        lines.append("")
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str | None:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[:start] + block + text[end + len(END):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="a file written by `benchmarks --json`")
    parser.add_argument("--results", default=os.path.join(ROOT, "Benchmarks", "RESULTS.md"))
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--no-readme", action="store_true", help="leave the README alone")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    arguments = parser.parse_args()
    try:
        with open(arguments.json, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, json.JSONDecodeError) as error:
        print(f"{arguments.json}: {error}", file=sys.stderr)
        return 2
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        print(f"{arguments.json}: not a benchmark run (no \"results\" list)", file=sys.stderr)
        return 2
    run = Run(data)
    outputs = [(arguments.results, results_page(run, os.path.basename(arguments.json)) + "\n")]
    if not arguments.no_readme:
        with open(arguments.readme, encoding="utf-8") as file:
            readme = file.read()
        updated = replace_block(readme, readme_block(run))
        if updated is None:
            print(f"{arguments.readme}: no {BEGIN} ... {END} markers", file=sys.stderr)
            return 2
        outputs.append((arguments.readme, updated))
    stale = []
    for path, text in outputs:
        try:
            with open(path, encoding="utf-8") as file:
                current = file.read()
        except FileNotFoundError:
            current = None
        if current == text:
            continue
        if arguments.check:
            stale.append(path)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            print(f"wrote {path}")
    if stale:
        print("out of date with the run: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
