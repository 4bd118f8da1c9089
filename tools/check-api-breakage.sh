#!/usr/bin/env bash
# Reports changes to Braid's public API that would break its users, against a baseline: the
# latest release tag by default, or the git ref given (a tag, branch or commit).
#
#   tools/check-api-breakage.sh            # against the latest tag (git describe --tags)
#   tools/check-api-breakage.sh 0.1.0      # against a tag, branch or commit
#   tools/check-api-breakage.sh main --products Braid   # further options go to SwiftPM
#
# Runs `swift package diagnose-api-breaking-changes`, which builds the baseline in a checkout
# of its own and compares the API of every library product (Braid, BraidFramers,
# BraidServiceLifecycle; `--products NAME` narrows it). Known, intended breaks go one per
# line, as SwiftPM prints them, in tools/api-breakage-allowlist.txt.
#
# Exit status: 0 when nothing breaks, 1 when something does (the breaks are listed), 2 when
# there is nothing to compare against (no tag yet and no ref given) or the ref is unknown, 3
# when the comparison itself failed (the baseline does not build, say).
#
# Not a CI step yet: the repository has no release tag to compare against, and each run builds
# the whole baseline package from scratch, executables included, whatever `--products` says
# (17.5 minutes on two busy cores against the previous commit, `--products BraidFramers`).
# Once there is a tag, CI can run it with no argument, as a job of its own; `--baseline-dir DIR`
# keeps the baseline's API dump for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline="${1:-}"
if [[ $# -gt 0 ]]; then shift; fi
if [[ -z "$baseline" || "$baseline" == --* ]]; then
    if [[ -n "$baseline" ]]; then set -- "$baseline" "$@"; fi
    if ! baseline="$(git describe --tags --abbrev=0 2>/dev/null)"; then
        echo "check-api-breakage: no release tag to compare against; give a baseline ref (tools/check-api-breakage.sh REF)" >&2
        exit 2
    fi
fi
if ! git rev-parse --verify --quiet "$baseline^{commit}" >/dev/null; then
    echo "check-api-breakage: '$baseline' is not a tag, branch or commit of this repository" >&2
    exit 2
fi

allowlist=()
if [[ -s tools/api-breakage-allowlist.txt ]]; then
    allowlist=(--breakage-allowlist-path tools/api-breakage-allowlist.txt)
fi

echo "check-api-breakage: comparing the public API with $baseline ($(git rev-parse --short "$baseline^{commit}"))"
# SwiftPM exits non-zero both for breaks and for failures; its output tells them apart.
set +e
output="$(swift package diagnose-api-breaking-changes "$baseline" "${allowlist[@]}" "$@" 2>&1)"
status=$?
set -e
printf '%s\n' "$output"
if [[ $status -eq 0 ]]; then
    echo "check-api-breakage: no breaking change against $baseline"
    exit 0
fi
if grep -q 'API breakage' <<<"$output"; then
    echo "check-api-breakage: breaking changes against $baseline (listed above)" >&2
    exit 1
fi
echo "check-api-breakage: the comparison itself failed (status $status; see above)" >&2
exit 3
