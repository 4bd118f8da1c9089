#!/usr/bin/env bash
# Installs what Braid needs on a fresh Debian bookworm machine (idempotent; only missing
# packages are installed). Needs root or sudo for apt-get. With --benchmarks, also the peers
# only the benchmark suite runs: Go and quic-go 0.29, for the quic-go perf pair
# (tools/peers/quic-go-perf, built by the suite in GOPATH mode), and Chromium for the report check.
set -euo pipefail
packages=(pkg-config libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev libgnutls28-dev gnutls-bin openssl
  ngtcp2-client ngtcp2-server python3 python3-venv linux-perf zlib1g-dev)
# The Avahi discovery back end (libavahi-client) and the daemon, bus and tools its tests run:
# each test starts an avahi-daemon of its own on a private D-Bus system bus.
packages+=(libavahi-client-dev avahi-daemon avahi-utils dbus-daemon iproute2)
if [ "${1:-}" = --benchmarks ]; then
  packages+=(golang-go golang-github-lucas-clemente-quic-go-dev)
  # Headless Chromium loads the suite's HTML report to check that it renders
  # (tools/check-benchmark-report.py, run by tools/run-benchmarks.sh).
  packages+=(chromium)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
command -v swift >/dev/null || { echo "swift is not on PATH (Swift 6.1 or later is required)" >&2; exit 1; }

# The interop peers (aioquic and websockets, from PyPI) live in a virtual environment of the
# project's own, .build-python/, so the system Python stays untouched. The tests use it when it
# exists.
venv=.build-python
if ! "$venv/bin/python3" -c "import aioquic" 2>/dev/null; then
  echo "installing aioquic into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "aioquic==1.7.2"
fi
if ! "$venv/bin/python3" -c "import websockets" 2>/dev/null; then
  echo "installing websockets into $venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "websockets==17.4"
fi
# Python's zeroconf: an independent mDNS/DNS-SD implementation the discovery interop tests
# browse and advertise against.
if ! "$venv/bin/python3" -c "import zeroconf" 2>/dev/null; then
  echo "installing zeroconf into $venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "zeroconf==0.147.0"
fi
