#!/usr/bin/env python3
"""Loads the benchmark suite's HTML report in headless Chromium and checks what it renders.

The report (`benchmarks --html FILE`) is opened as a browser opens it: Chromium parses it, runs
any script in it and lays it out, and `--dump-dom` gives back the document it ended with. A
collector injected before the page's own content records every script error (window.onerror
and unhandled rejections) into the DOM, so they come back with it; console errors Chromium
logs count too. Then the rendered document must have:

- the title and the "Braid benchmarks" heading;
- after each chart heading, a chart (`div.chart`) whose SVG has as many bars (`rect`) and
  labels as the chart says it has (`data-bars`), and at least one;
- the targets table (`table#targets`) and the table of every row (`table#results`), not empty.

With `--json RUN.json` (the same run's JSON), each chart must also have one bar per row the run
recorded for its scenario and metric, the results table one row per result, and the targets
table one row per target.

Prints what is wrong and exits 1, or prints a summary and exits 0; exits 2 when Chromium is
missing (tools/install-deps.sh --benchmarks installs Debian's `chromium`).

Usage: tools/check-benchmark-report.py REPORT.html [--json RUN.json] [--chromium PATH]
"""

import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Injected first in <head>: records script errors in the DOM that --dump-dom returns.
COLLECTOR = """<script>
(function () {
  function record(text) {
    var add = function () {
      var node = document.createElement("pre");
      node.className = "braid-report-script-error";
      node.textContent = text;
      (document.body || document.documentElement).appendChild(node);
    };
    if (document.body) { add(); } else { document.addEventListener("DOMContentLoaded", add); }
  }
  window.addEventListener("error", function (event) {
    record("script error: " + event.message + " at " + event.filename + ":" + event.lineno);
  });
  window.addEventListener("unhandledrejection", function (event) {
    record("unhandled rejection: " + event.reason);
  });
})();
</script>"""


def find_chromium(explicit):
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render(chromium: str, page_html: str) -> tuple[str, str]:
    """The DOM Chromium ends with for this page, and what it logged."""
    with tempfile.TemporaryDirectory(prefix="braid-report-") as directory:
        page = os.path.join(directory, "report.html")
        with open(page, "w", encoding="utf-8") as file:
            file.write(page_html)
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--enable-logging=stderr", "--v=0",
            f"--user-data-dir={os.path.join(directory, 'profile')}",
            "--virtual-time-budget=5000", "--dump-dom", "file://" + page,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0 or "<html" not in result.stdout.lower():
            raise RuntimeError(f"chromium exited {result.returncode} without a document: {result.stderr[-2000:]}")
        return result.stdout, result.stderr


def inject(page_html: str) -> str:
    lowered = page_html.lower()
    at = lowered.find("<head>")
    if at >= 0:
        return page_html[:at + len("<head>")] + COLLECTOR + page_html[at + len("<head>"):]
    return COLLECTOR + page_html


class Document(html.parser.HTMLParser):
    """What the checks need of the rendered DOM."""

    def __init__(self):
        super().__init__()
        self.title = ""
        self.h1 = []
        self.sequence = []  # ("h2", text) and ("chart", attributes) in document order
        self.charts = []  # dicts: attributes, rects, texts
        self.tables = {}  # id -> row count
        self.errors = []
        self._text_target = None
        self._chart = None
        self._table = None
        self._depth_div = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag in ("title", "h1", "h2"):
            self._text_target = [tag, ""]
        elif tag == "pre" and attributes.get("class") == "braid-report-script-error":
            self._text_target = ["error", ""]
        elif tag == "div" and "chart" in (attributes.get("class") or "").split():
            self._chart = {"attributes": attributes, "rects": 0, "texts": 0}
            self._depth_div = 1
        elif tag == "div" and self._chart is not None:
            self._depth_div += 1
        elif tag == "rect" and self._chart is not None:
            self._chart["rects"] += 1
        elif tag == "text" and self._chart is not None:
            self._chart["texts"] += 1
        elif tag == "table":
            self._table = attributes.get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = 0
        elif tag == "tr" and self._table is not None:
            self.tables[self._table] += 1

    def handle_endtag(self, tag):
        if self._text_target and tag in ("title", "h1", "h2", "pre"):
            kind, text = self._text_target
            text = " ".join(text.split())
            if kind == "title":
                self.title = text
            elif kind == "h1":
                self.h1.append(text)
            elif kind == "h2":
                self.sequence.append(("h2", text))
            elif kind == "error":
                self.errors.append(text)
            self._text_target = None
        elif tag == "div" and self._chart is not None:
            self._depth_div -= 1
            if self._depth_div == 0:
                self.charts.append(self._chart)
                self.sequence.append(("chart", self._chart))
                self._chart = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._text_target is not None:
            self._text_target[1] += data


def console_errors(log: str) -> list[str]:
    """Lines Chromium logged for the page's console at error level, or an uncaught exception."""
    found = []
    for line in log.splitlines():
        if "CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line):
            found.append(line.strip())
    return found


def problems(document: Document, log: str, run: dict | None) -> list[str]:
    messages = [f"script error in the page: {error}" for error in document.errors]
    messages += [f"console error: {line}" for line in console_errors(log)]
    if document.title != "Braid benchmarks" and not document.title.startswith("Braid benchmarks"):
        messages.append(f"title is {document.title!r}, not 'Braid benchmarks'")
    if not any(text.startswith("Braid benchmarks") for text in document.h1):
        messages.append("no 'Braid benchmarks' heading")
    if not document.charts:
        messages.append("no chart rendered")
    for index, (kind, value) in enumerate(document.sequence):
        if kind == "h2" and value not in ("Targets", "All results"):
            following = document.sequence[index + 1] if index + 1 < len(document.sequence) else None
            if following is None or following[0] != "chart":
                messages.append(f"heading {value!r} has no chart after it")
    for chart in document.charts:
        attributes = chart["attributes"]
        name = f"chart {attributes.get('data-scenario')} / {attributes.get('data-metric')}"
        try:
            bars = int(attributes.get("data-bars", ""))
        except ValueError:
            messages.append(f"{name}: no data-bars attribute")
            continue
        if bars < 1:
            messages.append(f"{name}: no bars")
        if chart["rects"] != bars:
            messages.append(f"{name}: {chart['rects']} bars drawn, {bars} expected")
        if chart["texts"] < 2 * bars:
            messages.append(f"{name}: {chart['texts']} labels for {bars} bars (a name and a value each)")
        if run is not None:
            recorded = sum(1 for row in run.get("results", [])
                           if row.get("scenario") == attributes.get("data-scenario") and row.get("metric") == attributes.get("data-metric"))
            if recorded != bars:
                messages.append(f"{name}: {bars} bars, but the run recorded {recorded} rows")
    for table in ("targets", "results"):
        if table not in document.tables:
            messages.append(f"no table#{table}")
        elif document.tables[table] == 0:
            messages.append(f"table#{table} is empty")
    if run is not None:
        if document.tables.get("results") not in (None, len(run.get("results", [])) + 1):
            messages.append(f"table#results has {document.tables['results']} rows, the run {len(run.get('results', []))} results (and a header)")
        if document.tables.get("targets") not in (None, len(run.get("targets", []))):
            messages.append(f"table#targets has {document.tables['targets']} rows, the run {len(run.get('targets', []))} targets")
    return messages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the HTML file `benchmarks --html` wrote")
    parser.add_argument("--json", help="the same run's JSON (`benchmarks --json`), to check the charts and tables against")
    parser.add_argument("--chromium", help="the browser to run (default: chromium on PATH)")
    arguments = parser.parse_args()
    chromium = find_chromium(arguments.chromium)
    if chromium is None:
        print("chromium is not installed: tools/install-deps.sh --benchmarks installs it", file=sys.stderr)
        return 2
    with open(arguments.report, encoding="utf-8") as file:
        page = file.read()
    run = None
    if arguments.json:
        with open(arguments.json, encoding="utf-8") as file:
            run = json.load(file)
    try:
        dom, log = render(chromium, inject(page))
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"{arguments.report}: {error}", file=sys.stderr)
        return 1
    document = Document()
    document.feed(dom)
    messages = problems(document, log, run)
    for message in messages:
        print(f"{arguments.report}: {message}", file=sys.stderr)
    if messages:
        return 1
    print(f"{arguments.report}: renders in Chromium without script errors: {len(document.charts)} charts, "
          f"{document.tables.get('targets', 0)} targets, {max(document.tables.get('results', 1) - 1, 0)} result rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
