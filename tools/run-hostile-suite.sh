#!/usr/bin/env bash
# The hostile-peer suite's long form: installs what is missing, builds the release
# `braid` tool and runs tools/hostile_suite.py against `braid serve` (floods, abandoned
# handshakes, starving clients, a killed client, HTTP/3 rapid reset), each bound checked on
# the server's RSS; then the published-attack suites (QUICAttackTests, HTTP3FloodTests) with
# their attacks BRAID_HOSTILE_SCALE times larger (default 5) and the same bounds.
# Arguments are passed on to hostile_suite.py (e.g. --only flood --rate 20000 --seconds 5).
# About fifteen minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
swift build -c release --product braid
status=0
.build-python/bin/python3 tools/hostile_suite.py "$@" || status=$?
swift build --build-tests
tests=.build/x86_64-unknown-linux-gnu/debug/BraidPackageTests.xctest
BRAID_HOSTILE_SCALE="${BRAID_HOSTILE_SCALE:-5}" "$tests" --testing-library swift-testing \
    --filter 'QUICAttackTests|HTTP3FloodTests' || status=$?
exit "$status"
