#!/usr/bin/env bash
# Interleaved A/B of two release builds of the `benchmarks` binary on QUIC datagrams: the
# `quic-server` role and the `quic-client` role echoing DATAGRAMS datagrams of SIZE bytes (as the
# `cpu` scenario's "braid quic datagrams" row). The builds take turns round by round.
#
#   tools/ab/quic-datagrams.sh /tmp/A /tmp/B [rounds]
#
# Environment: DATAGRAMS (default 100000); SIZE (default 1150).
#
# Per run, one line: datagrams echoed per second and client / server / both CPU per datagram
# (`perf stat` task-clock of each process, start-up and handshake included). At the end, the
# median of each metric per build, and B/A.
set -euo pipefail
a=$1 b=$2 rounds=${3:-5}
datagrams=${DATAGRAMS:-100000} size=${SIZE:-1150}
here=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$here/Tests/BraidTests/Fixtures
. "$here/tools/ab/roles-ab.sh"

run() { # label binary
  local label=$1 bin=$2
  ab_start_server "$bin" quic-server --connections 1 --cert "$fixtures/server.pem" --key "$fixtures/server-key.pem"
  perf stat -e task-clock -x, -o "$out/client.perf" -- "$bin" role quic-client --alpn echo --streams 0 \
    --datagrams "$datagrams" --datagram-size "$size" --port "$port" --ca "$fixtures/ca.pem" >"$out/client.out" 2>"$out/client.err" \
    || { echo "$label client failed: $(tail -c 400 "$out/client.err")" >&2; exit 1; }
  ab_finish_server
  ab_record_rate "$label" datagram datagrams_received
}

ab_interleave "$rounds" "$a" "$b"
ab_summary "datagram/s" "cpu client us" "cpu server us" "cpu both us"
