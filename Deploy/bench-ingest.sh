#!/usr/bin/env bash
# Ingest benchmark: builds release binaries, starts a relay on a fresh embedded (durable)
# PostgreSQL in a temporary directory with one app, then drives it with push-relay-bench:
#   1. closed loop, as fast as it goes (throughput);
#   2. open loop at 1,000 webhooks/s (accept latency percentiles).
# Usage: Deploy/bench-ingest.sh [requests] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."

requests="${1:-50000}"
concurrency="${2:-64}"
port="${BENCH_PORT:-18480}"

Deploy/bootstrap.sh
swift build -c release --product push-relay >&2
swift build -c release --product push-relay-bench >&2

. Deploy/bench-relay.sh

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; PostgreSQL $(.build/release/push-relay version | sed -n 2p) client, fsync and synchronous_commit on"
bench=.build/release/push-relay-bench
$bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency "$concurrency"
$bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests 20000 --concurrency 32 --rate 1000
