#!/usr/bin/env bash
# End-to-end A/B on a noisy machine: two relay binaries measured in interleaved runs of one
# invocation, round after round (A then B in odd rounds, B then A in even ones, so a drift of the
# machine's speed within a round favours neither), each by `push-relay-bench e2e` (webhooks in, pushes out
# to the in-process sandbox, a fresh embedded PostgreSQL per run). Prints, per run, the throughput
# run's notifications/s and the relay process's CPU time per notification (utime + stime from
# /proc/PID/stat, sampled every 0.1 s until the relay exits, over the throughput run's webhooks and
# the latency run's). Compare A and B within a round, not runs from different hours.
# Usage: Deploy/bench-e2e-ab.sh A_BINARY B_BINARY [requests (30000)] [rounds (4)] [connections (512)]
#   e.g. git worktree add /tmp/base main && (cd /tmp/base && swift build -c release --product push-relay)
#        Deploy/bench-e2e-ab.sh /tmp/base/.build/release/push-relay .build/release/push-relay
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
declare -A binary=([A]="$(realpath "$1")" [B]="$(realpath "$2")")
requests="${3:-30000}"
rounds="${4:-4}"
connections="${5:-512}"
rate=500
seconds=4
swift build -c release --product push-relay-bench >&2
bench=.build/release/push-relay-bench
ticks="$(getconf CLK_TCK)"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "each run: $requests webhooks on $connections connections (closed loop), then ${seconds} s at ${rate}/s"
for round in $(seq 1 "$rounds"); do
    order="A B"
    if [ $((round % 2)) -eq 0 ]; then order="B A"; fi
    for side in $order; do
        out="$(mktemp /tmp/push-relay-e2e-ab.XXXXXX)"
        "$bench" e2e --relay "${binary[$side]}" --requests "$requests" --concurrency "$connections" --rate "$rate" --seconds "$seconds" > "$out" 2>&1 &
        run=$!
        cpu=0
        while kill -0 "$run" 2>/dev/null; do
            pid="$(pgrep -f -- "${binary[$side]} serve" | head -1 || true)"
            if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
                sample="$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true)"
                [ -n "$sample" ] && cpu="$sample"
            fi
            sleep 0.1
        done
        wait "$run" || { echo "run $side of round $round failed:" >&2; cat "$out" >&2; exit 1; }
        rate_line="$(grep 'notifications/s end to end' "$out" | sed 's/.*: //')"
        notifications=$((requests + rate * seconds))
        per="$(awk -v c="$cpu" -v t="$ticks" -v n="$notifications" 'BEGIN { printf "%.0f", c / t / n * 1e6 }')"
        echo "round $round $side: ${rate_line}; relay CPU ${per} µs per notification"
        rm -f "$out"
    done
done
