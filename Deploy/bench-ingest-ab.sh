#!/usr/bin/env bash
# Ingest A/B on a noisy machine: two relay binaries (say the last release build of main and of a
# branch) measured in interleaved runs of one invocation, A then B, round after round, each on a
# fresh embedded PostgreSQL, driven by the same push-relay-bench. It prints the relay process's
# CPU time per webhook (utime + stime from /proc/PID/stat over the closed loop) and the
# throughput of each run: compare A and B within a round, not runs from different hours.
# Usage: Deploy/bench-ingest-ab.sh A_BINARY B_BINARY [requests per run (40000)] [rounds (5)]
#   e.g. git worktree add /tmp/base main && (cd /tmp/base && swift build -c release --product push-relay)
#        Deploy/bench-ingest-ab.sh /tmp/base/.build/release/push-relay .build/release/push-relay
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
declare -A binary=([A]="$1" [B]="$2")
requests="${3:-40000}"
rounds="${4:-5}"
port="${BENCH_PORT:-18490}"
swift build -c release --product push-relay-bench >&2
bench=.build/release/push-relay-bench

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u '+%Y-%m-%d %H:%M UTC')"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
relay=""
work=""
cleanup() {
    if [ -n "$relay" ]; then kill -TERM "$relay" 2>/dev/null || true; wait "$relay" 2>/dev/null || true; fi
    if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
for round in $(seq 1 "$rounds"); do
    for side in A B; do
        work="$(mktemp -d /tmp/push-relay-ab.XXXXXX)"
        chmod 755 "$work"
        secret="ab-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
        printf 'http:\n  port: %s\nlog:\n  level: warning\ndelivery:\n  enabled: false\napps:\n  - id: bench\n    webhook_secrets: ["%s"]\n' \
            "$port" "$secret" > "$work/config.yaml"
        "${binary[$side]}" serve --config "$work/config.yaml" --data-dir "$work/data" > "$work/relay.log" 2>&1 &
        relay=$!
        for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.5; done
        curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { echo "relay $side did not become ready:" >&2; cat "$work/relay.log" >&2; exit 1; }
        $bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests 5000 --concurrency 64 --warmup 0 >/dev/null
        before=$(cpu "$relay")
        output=$($bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency 64 --warmup 0)
        after=$(cpu "$relay")
        rate=$(echo "$output" | grep -oE '[0-9,]+(\.[0-9]+)? webhooks/s' | head -n 1)
        echo "round $round $side: relay CPU $(( (after - before) * 1000000 / $(getconf CLK_TCK) / requests )) us per webhook, $rate"
        cleanup
        relay=""
        work=""
    done
done
