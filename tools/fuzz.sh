#!/bin/sh
# Fuzzes what Braid parses from the network or from disk with libFuzzer and the address
# sanitizer, for a bounded time (default 60 s), starting from the committed corpus.
#
# Usage: tools/fuzz.sh TARGET [seconds] [libFuzzer options...]
#        tools/fuzz.sh TARGET --seeds     (rewrites the target's generated seeds, see below)
#
# Targets (each: shared input code that BraidTests also compiles and replays the corpus through,
# an entry point in tools/fuzz/, a corpus in Tests/BraidTests/Fixtures/fuzz-TARGET):
#   framers      the TLV decoder and the Coder decode path (Tests/BraidTests/Framers/FramersFuzzInput.swift)
#   quic-server  a QUIC server endpoint with the test certificate: sequences of datagrams from
#                several addresses, new connections and routing to existing ones
#                (Tests/BraidTests/BraidQUIC/QUICServerFuzzInput.swift)
#   session-cache  the session-cache file format and the ticket formats, and the tickets the
#                file vouches for handed to the QUIC and TLS client engines
#                (Tests/BraidTests/Braid/SessionCacheFuzzInput.swift)
#   perf         the perf request (PerfRequest) and the echo replies (EchoDatagram)
#                (Tests/BraidTests/Tool/PerfFuzzInput.swift)
#   websocket    the WebSocket engine: the upgrade (a server's request, a client's response),
#                then frames (Tests/BraidTests/BraidWebSocket/WebSocketFuzzInput.swift)
#   custom-framer  a custom framer's input path: the peer's bytes in pieces through a
#                FramerLayer running four framers written the ways real ones are
#                (Tests/BraidTests/Framers/CustomFramerFuzzInput.swift)
#   websocket-frames  the WebSocket frame parser alone, and the engine's frames with
#                permessage-deflate on or off: compressed messages, fragments, inflation bounded
#                by the maximum (Tests/BraidTests/BraidWebSocket/WebSocketFramesFuzzInput.swift)
#   websocket-upgrade  the upgrade's HTTP head both ways and the Sec-WebSocket-Extensions
#                grammar with permessage-deflate's negotiation
#                (Tests/BraidTests/BraidWebSocket/WebSocketUpgradeFuzzInput.swift)
#   http3-server  an HTTP/3 server engine fed a client's streams in pieces, with resets, stops
#                and closes (the "rapid reset" attack among the seeds): the field sections it
#                gathers and bounds, the responses it writes, and the requests mapped to
#                HTTPRequest (Tests/BraidTests/BraidHTTP3/HTTP3ServerFuzzInput.swift)
#   discovery    the DNS message parser, then the mDNS browser and responder engines fed what
#                parses (Tests/BraidTests/BraidDiscovery/DiscoveryFuzzInput.swift)
#
# How it builds:
# - framers: Sources/BraidFramers is Foundation-only, so swiftc compiles it with the harness
#   into one module (-sanitize=fuzzer,address); so for discovery (Sources/BraidDiscovery has no
#   dependencies).
# - the others need the C modules (CBraid: ngtcp2, ngtcp2_crypto_gnutls, GnuTLS, nghttp3) and
#   swift-collections/swift-log, so SwiftPM builds the library modules once, instrumented, in a
#   scratch directory of their own (.build/fuzz-spm): `swift build -c release --sanitize=address
#   -Xswiftc -sanitize=fuzzer -Xswiftc -enable-testing -Xcc -fsanitize=fuzzer-no-link --target
#   BraidPerf` (optimized, as -Onone runs several times slower; -enable-testing for the harness's
#   @testable imports; preconditions stay on; no executable is linked there). swiftc then compiles
#   the harness (the shared input file and the entry point) as one more module of the package
#   (-package-name as SwiftPM names it) against .build/fuzz-spm/release/Modules, with SwiftPM's
#   module maps for CBraid and CBraidUDP (-Xcc -fmodule-map-file), and links it with the
#   modules' object files and -lngtcp2 -lngtcp2_crypto_gnutls -lgnutls -lnghttp3. The Avahi
#   module (CBraidAvahi, a system library) has its module map in Sources, not in the build.
#
# Runs are one niced process (no -jobs: the machine is shared). New inputs go to .build/fuzz/TARGET-corpus;
# a crash, leak or timeout leaves its input in .build/fuzz/TARGET-artifacts/. Copy inputs worth
# keeping (a fixed crash's input, as a regression seed) into Tests/BraidTests/Fixtures/fuzz-TARGET.
# libFuzzer prints the executions it made (#N ... exec/s) and "Done N runs" at the end.
#
# --seeds: the quic-server and session-cache seeds come from Braid's own engines (a real client
# Initial, a real Retry exchange, a real ticket file); this rewrites them in the corpus (and
# the websocket and custom-framer seeds, which their input files spell out).
set -eu
target="${1:?usage: tools/fuzz.sh framers|quic-server|session-cache|perf|websocket|websocket-frames|websocket-upgrade|custom-framer|http3-server|discovery [seconds|--seeds] [libFuzzer options]}"
shift
seconds=60
case "${1:-}" in
    "" | -*) ;;
    *) seconds="$1"; shift ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.build/fuzz"
corpus="$root/Tests/BraidTests/Fixtures/fuzz-$target"
mkdir -p "$out/$target-corpus" "$out/$target-artifacts"
binary="$out/$target-fuzz"
# Runs a compile, showing its output without the linker's noise about ASan's local symbols.
compile() {
    status=0
    "$@" >"$out/$target-build.log" 2>&1 || status=$?
    grep -v "Cannot export local symbol" "$out/$target-build.log" >&2 || true
    return "$status"
}

build_with_modules() {
    input="$1"
    main="$2"
    # A third file: more shared input code the harness needs.
    extra="${3:-}"
    scratch="$root/.build/fuzz-spm"
    (cd "$root" && nice swift build -c release --scratch-path "$scratch" --sanitize=address \
        -Xswiftc -sanitize=fuzzer -Xswiftc -enable-testing -Xcc -fsanitize=fuzzer-no-link --target BraidPerf) >&2
    build="$scratch/release"
    # The object files, in a response file: some of their names have spaces.
    : >"$out/$target-objects"
    for module in BraidPerf Braid BraidIO BraidQUICIO BraidHTTP3IO BraidTLSIO BraidWebSocketIO BraidQUIC BraidTLS BraidHTTP3 BraidSecurity \
        BraidWebSocket BraidDiscovery BraidDiscoveryIO BraidCore BraidFramers \
        CBraid CBraidUDP CBraidLock \
        DequeModule HeapModule InternalCollectionsUtilities ContainersPreview Logging CoreMetrics HTTPTypes; do
        if [ -f "$build/$module.build/sources" ]; then
            # The objects of the module's current sources only: a deleted source's object stays behind.
            while IFS= read -r source; do
                printf '"%s"\n' "$build/$module.build/$(basename "$source").o" >>"$out/$target-objects"
            done <"$build/$module.build/sources"
        else
            for object in "$build/$module.build/"*.o; do printf '"%s"\n' "$object" >>"$out/$target-objects"; done
        fi
    done
    # The harness uses `package` declarations: it joins the package under SwiftPM's name for it.
    package=$(grep '"-module-name","BraidQUIC"' "$scratch/release.yaml" | grep -o '"-package-name","[^"]*' | head -1 | cut -d'"' -f4)
    compile nice swiftc -sanitize=fuzzer,address -parse-as-library -g -O -module-name BraidFuzz -package-name "$package" \
        -I "$build/Modules" \
        -Xcc -fmodule-map-file="$build/CBraid.build/module.modulemap" -Xcc -I"$root/Sources/CBraid/include" \
        -Xcc -fmodule-map-file="$build/CBraidUDP.build/module.modulemap" -Xcc -I"$root/Sources/CBraidUDP/include" \
        -Xcc -fmodule-map-file="$build/CBraidLock.build/module.modulemap" -Xcc -I"$root/Sources/CBraidLock/include" \
        -Xcc -fmodule-map-file="$root/Sources/CBraidAvahi/module.modulemap" \
        "$root/$input" "$root/$main" ${extra:+"$root/$extra"} @"$out/$target-objects" \
        -lngtcp2 -lngtcp2_crypto_gnutls -lgnutls -lnghttp3 -lz -o "$binary"
}

case "$target" in
    framers)
        compile swiftc -sanitize=fuzzer,address -parse-as-library -g -Onone \
            "$root"/Sources/BraidFramers/*.swift \
            "$root/Tests/BraidTests/Framers/FramersFuzzInput.swift" \
            "$root/tools/fuzz/FramersFuzzMain.swift" \
            -o "$binary"
        max_len=8192
        ;;
    quic-server)
        build_with_modules Tests/BraidTests/BraidQUIC/QUICServerFuzzInput.swift tools/fuzz/QUICServerFuzzMain.swift
        max_len=16384
        ;;
    session-cache)
        build_with_modules Tests/BraidTests/Braid/SessionCacheFuzzInput.swift tools/fuzz/SessionCacheFuzzMain.swift
        max_len=16384
        ;;
    perf)
        build_with_modules Tests/BraidTests/Tool/PerfFuzzInput.swift tools/fuzz/PerfFuzzMain.swift
        max_len=8192
        ;;
    http3-server)
        build_with_modules Tests/BraidTests/BraidHTTP3/HTTP3ServerFuzzInput.swift tools/fuzz/HTTP3ServerFuzzMain.swift
        max_len=16384
        ;;
    discovery)
        compile swiftc -sanitize=fuzzer,address -parse-as-library -g -O \
            "$root"/Sources/BraidDiscovery/*/*.swift \
            "$root/Tests/BraidTests/BraidDiscovery/DiscoveryFuzzInput.swift" \
            "$root/tools/fuzz/DiscoveryFuzzMain.swift" \
            -o "$binary"
        max_len=9000
        ;;
    websocket)
        build_with_modules Tests/BraidTests/BraidWebSocket/WebSocketFuzzInput.swift tools/fuzz/WebSocketFuzzMain.swift
        max_len=8192
        ;;
    custom-framer)
        build_with_modules Tests/BraidTests/Framers/CustomFramerFuzzInput.swift tools/fuzz/CustomFramerFuzzMain.swift
        max_len=8192
        ;;
    websocket-frames | websocket-upgrade)
        # Both inputs use the websocket target's helpers (its key sequence, its frame writer).
        name=$(echo "$target" | sed 's/websocket-frames/Frames/; s/websocket-upgrade/Upgrade/')
        input="Tests/BraidTests/BraidWebSocket/WebSocket${name}FuzzInput.swift"
        build_with_modules "$input" "tools/fuzz/WebSocket${name}FuzzMain.swift" Tests/BraidTests/BraidWebSocket/WebSocketFuzzInput.swift
        max_len=8192
        ;;
    *)
        echo "unknown target $target (framers, quic-server, session-cache, perf, websocket, websocket-frames, websocket-upgrade, custom-framer, http3-server, discovery)" >&2
        exit 2
        ;;
esac

if [ "${1:-}" = "--seeds" ]; then
    if [ "$target" = framers ]; then
        echo "the framers seeds are written by hand" >&2
        exit 2
    fi
    mkdir -p "$corpus"
    BRAID_FUZZ_WRITE_SEEDS="$corpus" "$binary"
    echo "wrote the seeds of $target into $corpus" >&2
    exit 0
fi

exec nice "$binary" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -artifact_prefix="$out/$target-artifacts/" "$@" \
    "$out/$target-corpus" "$corpus"
