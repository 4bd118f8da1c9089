#!/usr/bin/env bash
# The hostile-peer suite's long form: installs what is missing, builds the release
# `braid` tool and runs tools/hostile_suite.py against `braid serve` (floods, abandoned
# handshakes, starving clients, a killed client), each bound checked on the server's RSS.
# Arguments are passed on (e.g. --only flood --rate 20000 --seconds 5). About two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
swift build -c release --product braid
exec .build-python/bin/python3 tools/hostile_suite.py "$@"
