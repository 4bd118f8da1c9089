#!/usr/bin/env bash
# Interleaved A/B of two release builds of the `benchmarks` binary on Braid's `UDP()` stack over
# loopback, driving the `udp-server` and `udp-client` roles of Benchmarks/Harness/UDPRoles.swift
# as the `cpu` scenario's Braid UDP rows do: the client sends BYTES in 1,200-byte datagrams
# (in `batch` blocks of BATCH sends; 0: one `send` per datagram), the server reads its peer's
# connection with `messages` and counts what arrives. The builds take turns round by round
# (A B, then B A, ...: this shared machine's speed drifts by up to half between runs; only
# interleaved rounds compare).
#
#   tools/ab/udp.sh /tmp/A /tmp/B [rounds]
#
# Environment: BYTES (default 200000000); BATCH (default 64); RATE (Mbit/s of payload the client
# paces itself to; default 0, unpaced). Unpaced, the sender outruns the receiver and the
# server's CPU per byte follows how much its socket dropped; at a RATE the receiver keeps up
# with (delivered near 100%), its CPU per byte is its own cost per datagram.
#
# Per run, one line: the share of the sent bytes the server received, and client / server /
# both CPU per byte received and the client's per byte sent (`perf stat` task-clock of each
# process, start-up included). At the end, the median of each metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
bytes=${BYTES:-200000000} batch=${BATCH:-64} rate=${RATE:-0}
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/tools/ab/roles-ab.sh"

run() { # label binary
  local label=$1 bin=$2
  ab_start_server "$bin" udp-server
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$bin" role udp-client --port "$port" --bytes "$bytes" \
    --batch "$batch" --rate "$rate" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  ab_finish_server
  python3 - "$label" "$out" "$results" "$(ab_task_ms "$out/client.perf")" "$(ab_task_ms "$out/server.perf")" <<'PY'
import json, sys
label, out, results = sys.argv[1:4]
client_ms, server_ms = float(sys.argv[4]), float(sys.argv[5])
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
sent, received = last_json(f"{out}/client.out")["bytes"], last_json(f"{out}/server.out")["bytes"]
c, s = client_ms * 1e6, server_ms * 1e6
if received == 0:
    # Nothing to divide by: the run is reported and counted as 0% delivered, without CPU rows.
    print(f"{label}: the server received nothing", flush=True)
    with open(results, "a") as f:
        f.write(f"{label}\tdelivered %\t0\n")
    sys.exit(0)
rows = [("delivered %", 100 * received / sent), ("cpu client ns/B", c / received), ("cpu server ns/B", s / received),
        ("cpu both ns/B", (c + s) / received), ("cpu client ns/B sent", c / sent)]
print(f"{label}: " + ", ".join(f"{m} {v:.2f}" for m, v in rows), flush=True)
with open(results, "a") as f:
    for metric, value in rows:
        f.write(f"{label}\t{metric}\t{value}\n")
PY
}

ab_interleave "$rounds" "$a" "$b"
ab_summary "delivered %" "cpu client ns/B" "cpu server ns/B" "cpu both ns/B" "cpu client ns/B sent"
