#!/usr/bin/env bash
# Interleaved A/B of two builds of the `braid` tool over loopback: a perf download and an echo
# of small stream reads, each build serving itself, the builds taking turns round by round (this
# shared machine's speed drifts by up to half between runs; only interleaved rounds compare).
#
#   tools/ab/quic-streams.sh A/braid B/braid [rounds] [download-bytes] [echo-bytes (0: no echo)]
#
# STREAMS="1 8 64" runs the download once per count, the bytes split evenly over the streams.
# The builds alternate which goes first, round by round.
#
# Prints one line per run: build, test, goodput (Gbit/s), client and server CPU (ns per byte),
# and client and server context switches (per MB, and per second of the run), from `perf stat`
# around each process.
set -euo pipefail
a=$1 b=$2 rounds=${3:-4} download=${4:-1000000000} echo=${5:-200000000} streams=${STREAMS:-1}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
port=$((20000 + RANDOM % 20000))

run() { # label binary test client-args...
  local label=$1 bin=$2 test=$3; shift 3
  perf stat -e task-clock,context-switches -x, -o "$out/server.txt" -- \
    "$bin" serve --host 127.0.0.1 --port "$port" --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem" \
    >/dev/null 2>&1 &
  local perfpid=$!
  sleep 0.5
  perf stat -e task-clock,context-switches -x, -o "$out/client.txt" -- \
    "$bin" client --host 127.0.0.1 --port "$port" --ca "$fixtures/ca.pem" --sni localhost --json "$@" >"$out/client.json"
  pkill -TERM -P "$perfpid" || true
  wait "$perfpid" || true
  python3 - "$label" "$test" "$out" <<'PY'
import json, sys
label, test, out = sys.argv[1:4]
def stat(name):
    values = {}
    for line in open(f"{out}/{name}.txt"):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0] and parts[0][0].isdigit():
            values[parts[2]] = float(parts[0])
    return values
report = json.load(open(f"{out}/client.json"))
moved = report["bytes_sent"] + report["bytes_received"]
client, server = stat("client"), stat("server")
mb = moved / 1e6
print(f"{label} {test}: {report['goodput_gbit_s']:.2f} Gbit/s ok={report['ok']} "
      f"cpu client {client['task-clock'] * 1e6 / moved:.2f} server {server['task-clock'] * 1e6 / moved:.2f} ns/B "
      f"switches/MB client {client['context-switches'] / mb:.1f} server {server['context-switches'] / mb:.1f}", flush=True)
PY
  port=$((port + 1))
}

for round in $(seq 1 "$rounds"); do
  order="A B"; [ $((round % 2)) = 0 ] && order="B A"
  for side in $order; do
    bin=$a; [ "$side" = B ] && bin=$b
    for n in $streams; do
      run "$side" "$bin" "download x$n" --alpn perf --streams "$n" --download $((download / n))
    done
    [ "$echo" -gt 0 ] && run "$side" "$bin" echo --alpn echo --bytes "$echo"
  done
done
