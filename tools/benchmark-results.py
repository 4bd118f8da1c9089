#!/usr/bin/env python3
"""Writes Benchmarks/RESULTS.md, and the README's results table, from benchmark runs' JSON.

The figures in the repository's prose come from runs, not from typing: run the suite with
`--json FILE` (tools/run-benchmarks.sh --json out.json, or `benchmarks --json out.json`), then

    tools/benchmark-results.py out.json [out-2.json out-3.json]

rewrites Benchmarks/RESULTS.md whole (the machine, the command, the headline rows, every target
with its verdict, the notes, and every row grouped by scenario) and the table between the
`<!-- results:begin -->` and `<!-- results:end -->` markers of README.md. With several runs
(taken in order of their dates, whatever order the files are named in), a headline cell is the
median of the runs with their range, every target and row has a column per run, and a
target's verdict says in how many runs it was met; one machine drifts between runs, so a
target met in one run of three is not a target met. `--check` writes nothing and exits 1 when
either file differs from what the JSON gives (for CI, once the runs' JSON is kept beside them).

Usage: tools/benchmark-results.py RUN.json [RUN.json ...] [--results PATH] [--readme PATH | --no-readme] [--check]
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

# The per-message targets, which the README shows run by run (matched by how their text starts).
PER_MESSAGE_TARGETS = [
    "Braid UDP() with batch",
    "QUIC datagram echo",
    "TLV over TLS",
    "HTTP/3 CPU per 1 KiB request",
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


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


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


class Runs:
    """One or more runs of the suite, oldest first."""

    def __init__(self, runs: list[Run]):
        self.runs = sorted(runs, key=lambda run: str(run.machine.get("date", "")))

    @property
    def first(self) -> Run:
        return self.runs[0]

    def cell(self, scenario: str, config: str, metric: str) -> str:
        if len(self.runs) == 1:
            return self.first.cell(scenario, config, metric)
        rows = [run.find(scenario, config, metric) for run in self.runs]
        found = [row for row in rows if row is not None]
        if not found:
            return "-"
        values = [row["value"] for row in found]
        text = f"{number(median(values))} {found[0]['unit']}"
        if len(found) > 1:
            text += f" ({number(min(values))}–{number(max(values))})"
        if len(found) < len(self.runs):
            text += f" ({len(found)} of {len(self.runs)} runs)"
        return text

    def commands(self) -> str:
        commands = []
        for run in self.runs:
            if run.command() not in commands:
                commands.append(run.command())
        return "`, `".join(commands)

    def machines(self) -> list[str]:
        if len(self.runs) == 1:
            return [self.first.machine_line()]
        return [f"run {number + 1}: {run.machine_line()}" for number, run in enumerate(self.runs)]

    def target_names(self) -> list[str]:
        names = []
        for run in self.runs:
            for target in run.data.get("targets", []):
                if target["target"] not in names:
                    names.append(target["target"])
        return names

    def target(self, run: Run, name: str):
        return next((target for target in run.data.get("targets", []) if target["target"] == name), None)

    def verdict(self, name: str) -> str:
        verdicts = [(self.target(run, name) or {}).get("met") for run in self.runs]
        judged = [verdict for verdict in verdicts if verdict is not None]
        if not judged:
            return "-"
        if len(self.runs) == 1:
            return "met" if judged[0] else "missed"
        met = sum(1 for verdict in judged if verdict)
        if met == len(judged) == len(self.runs):
            return f"met in all {met}"
        if met == 0 and len(judged) == len(self.runs):
            return f"missed in all {len(judged)}"
        return f"met in {met} of {len(self.runs)}"

    def counts(self) -> tuple[int, int]:
        """Targets met in every run, and targets missed in at least one."""
        names = self.target_names()
        met = sum(1 for name in names if all((self.target(run, name) or {}).get("met") is True for run in self.runs))
        judged = sum(1 for name in names if any((self.target(run, name) or {}).get("met") is not None for run in self.runs))
        return met, judged - met

    def notes(self) -> list[str]:
        notes = []
        for number, run in enumerate(self.runs):
            for note in run.data.get("notes", []):
                notes.append(note if len(self.runs) == 1 else f"run {number + 1}: {note}")
        return notes


def escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def headline_table(runs: Runs) -> list[str]:
    lines = ["| Row | Measured |", "|---|---|"]
    for label, cells in HEADLINE:
        values = [runs.cell(scenario, config, metric) for _, scenario, config, metric in cells]
        if all(value == "-" for value in values):
            continue
        lines.append(f"| {escape(label)} | {escape(' / '.join(values))} |")
    return lines


def targets_table(runs: Runs, names: list[str]) -> list[str]:
    if not names:
        return ["The runs recorded no targets."]
    if len(runs.runs) == 1:
        header = ["| Target | Measured | |", "|---|---|---|"]
    else:
        columns = " | ".join(f"Run {number + 1}" for number in range(len(runs.runs)))
        header = [f"| Target | {columns} | Verdict |", "|---|" + "---|" * len(runs.runs) + "---|"]
    lines = header
    for name in names:
        measured = [(runs.target(run, name) or {}).get("measured", "-") for run in runs.runs]
        lines.append(f"| {escape(name)} | {' | '.join(escape(value) for value in measured)} | {runs.verdict(name)} |")
    return lines


def per_message_names(runs: Runs) -> list[str]:
    return [name for name in runs.target_names() if any(name.startswith(prefix) for prefix in PER_MESSAGE_TARGETS)]


def readme_block(runs: Runs) -> str:
    met, missed = runs.counts()
    count = len(runs.runs)
    if count == 1:
        measured = f"Measured with `{runs.commands()}` ({runs.first.machine_line()}). Median of the run's rounds, " \
            "with their min–max where repeated; a shared machine's speed drifts, so compare within a run."
        summary = f"Targets in that run: {met} met, {missed} missed (each one, with its ratio, in `Benchmarks/RESULTS.md`)."
    else:
        dates = ", ".join(str(run.machine.get("date", "?")) for run in runs.runs)
        loads = "; ".join(str(run.machine.get("load_average", "?")) for run in runs.runs)
        measured = f"Measured with `{runs.commands()}`, {count} runs ({dates}; load averages at their starts: {loads}). " \
            "Each cell is the median of the runs with their min–max; a shared machine's speed drifts between runs."
        summary = f"Targets across the {count} runs: {met} met in every run, {missed} missed in at least one " \
            "(each one, run by run, in `Benchmarks/RESULTS.md`)."
    lines = [BEGIN, measured, "", *headline_table(runs), ""]
    names = per_message_names(runs)
    if names:
        lines += ["Per-message targets, run by run:", "", *targets_table(runs, names), ""]
    lines += [summary, END]
    return "\n".join(lines)


def results_page(runs: Runs, sources: list[str]) -> str:
    count = len(runs.runs)
    if count == 1:
        origin = f"`{sources[0]}`, the JSON of one run of the benchmark suite"
    else:
        origin = ", ".join(f"`{source}`" for source in sources) + f", the JSON of {count} runs of the benchmark suite"
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `tools/benchmark-results.py` from {origin}; do not edit by hand (run the suite with "
        "`--json FILE` and the script again). `docs/benchmarks.md` says what each scenario measures and how to read it.",
        "",
        f"- Command: `{runs.commands()}`",
        *[f"- Machine: {line}" for line in runs.machines()],
        "",
        "## Headline",
        "",
        *headline_table(runs),
        "",
        "## Targets",
        "",
        "The suite prints these at the end of each run; they are never asserted in tests.",
        "",
        *targets_table(runs, runs.target_names()),
        "",
    ]
    notes = runs.notes()
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    lines += ["## Every row", ""]
    keys = []
    for run in runs.runs:
        for row in run.rows:
            key = (row["scenario"], row["config"], row["metric"])
            if key not in keys:
                keys.append(key)
    scenarios = []
    for scenario, _, _ in keys:
        if scenario not in scenarios:
            scenarios.append(scenario)
    for scenario in scenarios:
        if count == 1:
            lines += [f"### {scenario}", "", "| Configuration | Metric | Value |", "|---|---|---|"]
        else:
            columns = " | ".join(f"Run {number + 1}" for number in range(count))
            lines += [f"### {scenario}", "", f"| Configuration | Metric | {columns} |", "|---|---|" + "---|" * count]
        for key in keys:
            if key[0] != scenario:
                continue
            values = []
            for run in runs.runs:
                row = run.index.get(key)
                values.append("-" if row is None else f"{number(row['value'])} {escape(row['unit'])}")
            lines.append(f"| {escape(key[1])} | {escape(key[2])} | {' | '.join(values)} |")
        lines.append("")
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str | None:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[:start] + block + text[end + len(END):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="files written by `benchmarks --json`, one per run")
    parser.add_argument("--results", default=os.path.join(ROOT, "Benchmarks", "RESULTS.md"))
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--no-readme", action="store_true", help="leave the README alone")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    arguments = parser.parse_args()
    loaded = []
    for path in arguments.json:
        try:
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
        except (OSError, json.JSONDecodeError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            print(f"{path}: not a benchmark run (no \"results\" list)", file=sys.stderr)
            return 2
        loaded.append((path, Run(data)))
    runs = Runs([run for _, run in loaded])
    sources = [os.path.basename(path) for path, run in sorted(loaded, key=lambda item: runs.runs.index(item[1]))]
    outputs = [(arguments.results, results_page(runs, sources) + "\n")]
    if not arguments.no_readme:
        with open(arguments.readme, encoding="utf-8") as file:
            readme = file.read()
        updated = replace_block(readme, readme_block(runs))
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
        print("out of date with the runs: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
