#!/usr/bin/env bash
# Polling A/B on a noisy machine: two relay binaries measured in interleaved runs of one invocation
# (A then B in odd rounds, B then A in even ones), each run a fresh relay on a fresh embedded
# PostgreSQL under `push-relay-bench poll`. Prints each run's polls/s, latency percentiles and
# relay CPU per poll. Compare A and B within a round, not runs from different hours.
# Usage: scripts/bench/poll-ab.sh A_BINARY B_BINARY [rounds (3)] [owners (10000)] [connections (64)] [seconds (15)] [webhooks/s (500)]
#   e.g. git worktree add /tmp/base main && (cd /tmp/base && swift build -c release --product push-relay)
#        scripts/bench/poll-ab.sh /tmp/base/.build/release/push-relay .build/release/push-relay
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

ab_binaries "$@"
rounds="${3:-3}"
owners="${4:-10000}"
connections="${5:-64}"
seconds="${6:-15}"
rate="${7:-500}"
scripts/bootstrap.sh
build_products push-relay-bench

machine_line
echo "each run: $owners owners polling on $connections connections (closed loop) for $seconds s, webhooks at $rate/s"
for round in $(seq 1 "$rounds"); do
    for side in $(alternate "$round" A B); do
        port=$((18500 + round))
        relay_binary="${binary[$side]}"
        bench_relay
        "$bin/push-relay-bench" poll --url "http://127.0.0.1:$port" --app bench --secret "$secret" \
            --user-token-key-file "$user_token_key_file" --owners "$owners" --concurrency "$connections" --seconds "$seconds" \
            --webhook-rate "$rate" --relay-pid "$relay_pid" \
            | awk -v label="round $round $side:" '/polls  /{sub(/^ +polls +/, ""); polls=$0} /latency/{sub(/^ +latency +/, ""); latency=$0} /relay CPU/{sub(/^ +relay CPU +/, ""); sub(/ \(.*/, ""); cpu=$0} END {print label, polls "; " latency "; relay CPU " cpu}'
        cleanup
    done
done
