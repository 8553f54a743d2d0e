#!/usr/bin/env bash
# Runs the Swift suites N times while busy loops hold every core, as a loaded CI machine would,
# and prints each run's result, its seconds and the tests that failed: a test that fails here
# depends on the machine's speed. The batches are scripts/test.sh's (the main batch, then the
# multi-process suites, then PushRelayKit's), built once before the first run; with --main, the
# main batch alone (the one with every suite in parallel, where a stall shows first).
# Usage: scripts/test/stress.sh [--main] [runs (3)] [busy loops (one per core)]
#   scripts/test/stress.sh --main 3 4    the main batch 3 times under four busy loops
# Exit status 1 when a run failed; a failed run's log is kept in $TMPDIR (or /tmp).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

main_only=false
if [ "${1:-}" = --main ]; then
    main_only=true
    shift
fi
runs="${1:-3}"
loops="${2:-$(nproc)}"
[[ "$runs" =~ ^[0-9]+$ && "$loops" =~ ^[0-9]+$ ]] || usage

swift build --build-tests >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-stress.XXXXXX")
busy=()
stop_busy() {
    ((${#busy[@]})) && kill "${busy[@]}" 2>/dev/null || true
    busy=()
}
trap 'stop_busy; rm -rf "$work"' EXIT
for ((i = 0; i < loops; i++)); do
    (while :; do :; done) &
    busy+=($!)
done
batches=$($main_only && echo "the main batch" || echo "all three batches")
log "$runs runs of $batches with $loops busy loops on $(nproc) cores; logs in $work while it runs"

cluster_suites='ScaleOutTests|FailoverTests'
client_suite='PushRelayKitRelayTests'
results=()
any_failed=0
for ((run = 1; run <= runs; run++)); do
    start=$SECONDS
    status=0
    log="$work/run-$run.log"
    {
        reap=(scripts/test/reap.py --timeout 1800 --)  # fails a batch that hangs or leaves a process behind
        "${reap[@]}" swift test --skip-build --skip "$cluster_suites|$client_suite" || status=1
        if ! $main_only; then
            "${reap[@]}" swift test --skip-build --filter "$cluster_suites" || status=1
            "${reap[@]}" swift test --skip-build --filter "$client_suite" || status=1
        fi
    } >"$log" 2>&1
    failed=$(sed -n 's/^✘ Test "\(.*\)" failed.*/\1/p' "$log" | sort -u)
    line=$(printf 'run %d: %s in %d s' "$run" "$([ "$status" -eq 0 ] && echo passed || echo FAILED)" $((SECONDS - start)))
    [ -z "$failed" ] || line+=$'\n'$(sed 's/^/    failed: /' <<<"$failed")
    if [ "$status" -ne 0 ]; then
        # Kept past the run: what failed, with the lines around it.
        kept="${TMPDIR:-/tmp}/push-relay-stress-$(date -u +%Y%m%dT%H%M%S)-run-$run.log"
        cp "$log" "$kept"
        line+=$'\n'"    log: $kept"
        any_failed=1
    fi
    results+=("$line")
    log "$line"
done
stop_busy
log "summary ($runs runs of $batches, $loops busy loops, $(nproc) cores, $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)):"
printf '%s\n' "${results[@]}" >&2
exit "$any_failed"
