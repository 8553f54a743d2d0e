#!/usr/bin/env bash
# Polling benchmark: builds release binaries, starts a relay on a fresh embedded (durable)
# PostgreSQL with one app, then runs `push-relay-bench poll`: OWNERS app users polling their unread
# count with If-None-Match on CONNECTIONS connections for SECONDS, while webhooks at RATE/s each
# reply to one random owner. Prints polls/s, latency percentiles, the share answered 304 and the
# relay's CPU time per poll.
# With a fifth argument, polls come at that rate (open loop: latency counts from each poll's
# scheduled instant) instead of back to back on each connection.
# Usage: scripts/bench/poll.sh [owners (10000)] [connections (64)] [seconds (20)] [webhooks/s (500)] [polls/s (closed loop)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

owners="${1:-10000}"
connections="${2:-64}"
seconds="${3:-20}"
rate="${4:-500}"
polls="${5:-}"
port="${BENCH_PORT:-18470}"

scripts/bootstrap.sh
build_products push-relay push-relay-bench
bench_relay

machine_line
"$bin/push-relay-bench" poll --url "http://127.0.0.1:$port" --app bench --secret "$secret" \
    --user-token-key-file "$user_token_key_file" --owners "$owners" --concurrency "$connections" --seconds "$seconds" \
    --webhook-rate "$rate" ${polls:+--rate "$polls"} --relay-pid "$relay_pid"
