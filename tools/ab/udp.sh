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
# Environment: BYTES (default 200000000); BATCH (default 64).
#
# Per run, one line: the share of the sent bytes the server received, and client / server /
# both CPU per byte received and the client's per byte sent (`perf stat` task-clock of each
# process, start-up included). At the end, the median of each metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
bytes=${BYTES:-200000000} batch=${BATCH:-64}
out=$(mktemp -d)
results=$out/results.tsv
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
: >"$results"

run() { # label binary
  local label=$1 bin=$2 port=""
  : >"$out/server.out"
  perf stat -e task-clock -x, -o "$out/server.perf" -- "$bin" role udp-server >"$out/server.out" 2>"$out/server.err" &
  server_pid=$!
  for _ in $(seq 1 400); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$out/server.out" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "server did not start: $(tail -c 400 "$out/server.err")" >&2; exit 1; }
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$bin" role udp-client --port "$port" --bytes "$bytes" \
    --batch "$batch" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  wait "$server_pid" || true
  server_pid=""
  python3 - "$label" "$out" "$results" <<'PY'
import json, sys
label, out, results = sys.argv[1:4]
def task_ms(path):
    return next(float(l.split(",")[0]) for l in open(path) if ",task-clock," in l)
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
sent, received = last_json(f"{out}/client.out")["bytes"], last_json(f"{out}/server.out")["bytes"]
c, s = task_ms(f"{out}/client.perf") * 1e6, task_ms(f"{out}/server.perf") * 1e6
rows = [("delivered %", 100 * received / sent), ("cpu client ns/B", c / received), ("cpu server ns/B", s / received),
        ("cpu both ns/B", (c + s) / received), ("cpu client ns/B sent", c / sent)]
print(f"{label}: " + ", ".join(f"{m} {v:.2f}" for m, v in rows), flush=True)
with open(results, "a") as f:
    for metric, value in rows:
        f.write(f"{label}\t{metric}\t{value}\n")
PY
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then run A "$a"; run B "$b"; else run B "$b"; run A "$a"; fi
done
python3 - "$results" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, metric, value = line.rstrip("\n").split("\t")
    values[(label, metric)].append(float(value))
for metric in ["delivered %", "cpu client ns/B", "cpu server ns/B", "cpu both ns/B", "cpu client ns/B sent"]:
    a, b = statistics.median(values[("A", metric)]), statistics.median(values[("B", metric)])
    print(f"{metric:21} A {a:9.2f}  B {b:9.2f}  B/A {b / a:.3f}")
PY
