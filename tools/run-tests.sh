#!/usr/bin/env bash
# The README's test command: installs what is missing, then runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
python3 -m unittest discover -s tools/netem -p 'test_*.py'
python3 tools/check-doc-examples.py
# Benchmarks/RESULTS.md and the README's results table are what the committed runs' JSON gives.
python3 tools/benchmark-results.py Benchmarks/RESULTS-*.json --check
python3 tools/check-architecture.py
python3 -m unittest discover -s tools -p 'test_check_*.py'
swift build --build-tests
swift test --skip-build
# The DocC catalog: fails on an unresolved symbol link or any other documentation warning.
swift package --disable-sandbox generate-documentation --target Braid --warnings-as-errors
