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
# Environment: FRAMER=tlv|tlv-tcp|tlv-framer-tcp|coder (default tlv; tlv-tcp: TLV over plain TCP;
# tlv-framer-tcp: TLV's wire through a custom framer over plain TCP); FRAMER_B (B's framer, default
# FRAMER: with A and B the same binary, FRAMER=tlv-tcp FRAMER_B=tlv-framer-tcp compares the two
# framings); SIZE (TLV value bytes, default 1024); MESSAGES (default 200000).
#
# Per run, one line: messages per second (over the client's send-and-wait time, the handshake
# excluded) and client / server / both CPU per message (`perf stat` task-clock of each
# process, start-up included). At the end, the median of each metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-5}
framer_a=${FRAMER:-tlv} size=${SIZE:-1024} messages=${MESSAGES:-200000}
framer_b=${FRAMER_B:-$framer_a}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
. "$here/tools/ab/roles-ab.sh"

run() { # label binary
  local label=$1 bin=$2 framer
  if [ "$label" = B ]; then framer=$framer_b; else framer=$framer_a; fi
  ab_start_server "$bin" framed-server --framer "$framer" --messages "$messages" \
    --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$bin" role framed-client --framer "$framer" --messages "$messages" \
    --size "$size" --port "$port" --ca "$fixtures/ca.pem" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  ab_finish_server
  ab_record_rate "$label" msg messages
}

ab_interleave "$rounds" "$a" "$b"
ab_summary "msg/s" "cpu client us" "cpu server us" "cpu both us"
