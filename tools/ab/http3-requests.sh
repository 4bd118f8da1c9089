#!/usr/bin/env bash
# Interleaved A/B of two release builds on small HTTP/3 requests, as the `throughput`
# scenario's `braid http/3 requests` row: `braid serve --alpn h3` answering `/SIZE`, and the
# `http3-client` role of the `benchmarks` binary (HTTP3Client) keeping CONCURRENCY requests in
# flight on one connection. The builds take turns round by round (A B, then B A, ...: this
# shared machine's speed drifts by up to half between runs; only interleaved rounds compare).
#
#   swift build -c release --product braid && swift build -c release --product benchmarks
#   mkdir /tmp/A && cp .build/release/braid .build/release/benchmarks /tmp/A
#   ... change, rebuild, copy both to /tmp/B
#   tools/ab/http3-requests.sh /tmp/A /tmp/B [rounds]
#
# Environment: REQUESTS (default 50000), CONCURRENCY (default 100), SIZE (response bytes,
# default 1024).
#
# Per run, one line: requests per second and client / server / both CPU per request
# (`perf stat` task-clock of each process, start-up included). At the end, the median of each
# metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-5}
requests=${REQUESTS:-50000} concurrency=${CONCURRENCY:-100} size=${SIZE:-1024}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
. "$here/tools/ab/roles-ab.sh"

run() { # label directory
  local label=$1 dir=$2
  ab_start_command "$dir/braid" serve --alpn h3 --host 127.0.0.1 --port 0 \
    --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$dir/benchmarks" role http3-client --port "$port" \
    --ca "$fixtures/ca.pem" --path "/$size" --requests "$requests" --concurrency "$concurrency" \
    >"$out/client.out" 2>"$out/client.err" || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  # The server is perf stat's child: signalled itself, it shuts down and perf reports.
  pkill -TERM -P "$server_pid"
  ab_finish_server
  ab_record_rate "$label" req requests
}

ab_interleave "$rounds" "$a" "$b"
ab_summary "req/s" "cpu client us" "cpu server us" "cpu both us"
