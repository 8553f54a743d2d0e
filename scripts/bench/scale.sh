#!/usr/bin/env bash
# Scale-out benchmark: 1, 2 and 3 relay processes on one PostgreSQL server (started by the
# benchmark, durable), the webhook connections spread over them, pushes to the in-process sandbox
# (`push-relay-bench e2e --instances N`). Prints, per run, notifications/s end to end and the CPU
# time per notification of the relay processes together and of PostgreSQL, so the cost of
# coordinating several instances shows. The order of the instance counts alternates from round to
# round; compare runs within a round. On two cores more instances cannot be faster: the point is
# that the figures do not fall apart.
# Usage: scripts/bench/scale.sh [requests (20000)] [rounds (2)] [connections (128)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

requests="${1:-20000}"
rounds="${2:-2}"
connections="${3:-128}"
scripts/bootstrap.sh
build_products push-relay push-relay-bench

machine_line
echo "each run: $requests webhooks on $connections connections (closed loop), then 5 s at 500/s"
for round in $(seq 1 "$rounds"); do
    for n in $(alternate "$round" 1 2 3); do
        work_dir scale
        out="$work/bench.out"
        if ! "$bin/push-relay-bench" e2e --relay "$bin/push-relay" --instances "$n" --requests "$requests" \
            --concurrency "$connections" --rate 500 --seconds 5 --port "${BENCH_PORT:-18520}" > "$out" 2>&1; then
            echo "round $round, $n instances: failed" >&2
            cat "$out" >&2
            exit 1
        fi
        throughput="$(grep 'notifications/s end to end' "$out" | sed 's/.*: //')"
        cpu="$(grep 'CPU per notification' "$out" | sed 's/^ *CPU per notification *//')"
        shares="$(grep 'delivered per instance' "$out" | sed 's/^ *delivered per instance *//' || true)"
        echo "round $round, $n instance(s): $throughput; CPU per notification: $cpu${shares:+; delivered per instance $shares}"
        cleanup
    done
done
