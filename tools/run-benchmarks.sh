#!/usr/bin/env bash
# The README's benchmark command: installs what is missing, builds in release mode and runs
# the benchmark suite. Arguments are passed on (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --benchmarks
# The HTTP/3 rows run the release `braid` tool beside the suite's own binary.
swift build -c release --product braid
swift run -c release benchmarks "$@"
