#!/usr/bin/env bash
# The README's benchmark command: installs what is missing, builds in release mode and runs
# the benchmark suite. Arguments are passed on (e.g. --quick). With --html FILE, the report is
# then loaded in headless Chromium and checked (tools/check-benchmark-report.py: no script
# error, every chart and table rendered, against the run's JSON when --json FILE is given too).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --benchmarks
# The report check's own tests, first: a broken checker would pass a broken report.
python3 -m unittest discover -s tools -p 'test_report_in_chromium.py'
# The HTTP/3 rows run the release `braid` tool beside the suite's own binary.
swift build -c release --product braid
swift run -c release benchmarks "$@"

html="" json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --html) html="${2:-}"; shift ;;
    --html=*) html="${1#--html=}" ;;
    --json) json="${2:-}"; shift ;;
    --json=*) json="${1#--json=}" ;;
  esac
  shift
done
if [ -n "$html" ]; then
  python3 tools/check-benchmark-report.py "$html" ${json:+--json "$json"}
fi
