#!/usr/bin/env bash
# Interleaved A/B of two release builds of the `benchmarks` binary on the message framers over
# TLS (`TLV { TLS() }` or `Coder(..., using: .json) { TLS() }`), driving the `framed-server` and
# `framed-client` roles of Benchmarks/Harness/FramedRoles.swift as the `throughput` scenario's
# framer rows do. The builds take turns round by round (A B, then B A, ...: this shared
# machine's speed drifts by up to half between runs; only interleaved rounds compare).
#
#   swift build -c release --product benchmarks && cp .build/release/benchmarks /tmp/A
#   ... change, rebuild, cp .build/release/benchmarks /tmp/B
#   tools/ab/framed.sh /tmp/A /tmp/B [rounds]
#
# Environment: FRAMER=tlv|tlv-tcp|coder (default tlv; tlv-tcp: TLV over plain TCP); SIZE (TLV value bytes, default 1024); MESSAGES
# (default 200000).
#
# Per run, one line: messages per second (over the client's send-and-wait time, the handshake
# excluded) and client / server / both CPU per message (`perf stat` task-clock of each
# process, start-up included). At the end, the median of each metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-5}
framer=${FRAMER:-tlv} size=${SIZE:-1024} messages=${MESSAGES:-200000}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
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
  perf stat -e task-clock -x, -o "$out/server.perf" -- "$bin" role framed-server --framer "$framer" --messages "$messages" \
    --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem" >"$out/server.out" 2>"$out/server.err" &
  server_pid=$!
  for _ in $(seq 1 400); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$out/server.out" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "server did not start: $(tail -c 400 "$out/server.err")" >&2; exit 1; }
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$bin" role framed-client --framer "$framer" --messages "$messages" \
    --size "$size" --port "$port" --ca "$fixtures/ca.pem" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  wait "$server_pid" || true
  server_pid=""
  python3 - "$label" "$out" "$results" <<'PY'
import json, sys
label, out, results = sys.argv[1:4]
def task_ms(path):
    return next(float(l.split(",")[0]) for l in open(path) if ",task-clock," in l)
client = json.loads([l for l in open(f"{out}/client.out") if l.startswith("{")][-1])
rate = client["messages"] / client["seconds"]
c = task_ms(f"{out}/client.perf") * 1e3 / client["messages"]
s = task_ms(f"{out}/server.perf") * 1e3 / client["messages"]
print(f"{label}: {rate:,.0f} msg/s, cpu client {c:.2f} server {s:.2f} both {c + s:.2f} us/msg", flush=True)
with open(results, "a") as f:
    for metric, value in [("msg/s", rate), ("cpu client us", c), ("cpu server us", s), ("cpu both us", c + s)]:
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
for metric in ["msg/s", "cpu client us", "cpu server us", "cpu both us"]:
    a, b = statistics.median(values[("A", metric)]), statistics.median(values[("B", metric)])
    print(f"{metric:14} A {a:12.2f}  B {b:12.2f}  B/A {b / a:.3f}")
PY
