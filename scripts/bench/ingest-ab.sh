#!/usr/bin/env bash
# Ingest A/B on a noisy machine: two relay binaries (say the last release build of main and of a
# branch) measured in interleaved runs of one invocation, A then B, round after round, each on a
# fresh embedded PostgreSQL, driven by the same push-relay-bench. It prints the relay process's
# CPU time per webhook (utime + stime from /proc/PID/stat over the closed loop) and the
# throughput of each run: compare A and B within a round, not runs from different hours.
# Usage: scripts/bench/ingest-ab.sh A_BINARY B_BINARY [requests per run (40000)] [rounds (5)]
#   e.g. git worktree add /tmp/base main && (cd /tmp/base && swift build -c release --product push-relay)
#        scripts/bench/ingest-ab.sh /tmp/base/.build/release/push-relay .build/release/push-relay
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

ab_binaries "$@"
requests="${3:-40000}"
rounds="${4:-5}"
port="${BENCH_PORT:-18490}"
build_products push-relay-bench
bench="$bin/push-relay-bench"

machine_line
for round in $(seq 1 "$rounds"); do
    for side in A B; do
        relay_binary="${binary[$side]}"
        bench_relay
        $bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests 5000 --concurrency 64 --warmup 0 >/dev/null
        before=$(cpu_ticks "$relay_pid")
        output=$($bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency 64 --warmup 0)
        after=$(cpu_ticks "$relay_pid")
        rate=$(echo "$output" | grep -oE '[0-9,]+(\.[0-9]+)? webhooks/s' | head -n 1)
        echo "round $round $side: relay CPU $(( (after - before) * 1000000 / $(getconf CLK_TCK) / requests )) us per webhook, $rate"
        cleanup
    done
done
