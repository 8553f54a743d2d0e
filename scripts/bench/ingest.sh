#!/usr/bin/env bash
# Ingest benchmark: builds release binaries, starts a relay on a fresh embedded (durable)
# PostgreSQL in a temporary directory with one app, then drives it with push-relay-bench:
#   1. closed loop, as fast as it goes (throughput, and the machine's CPU time per webhook);
#   2. open loop at 1,000 webhooks/s (accept latency percentiles).
# Usage: scripts/bench/ingest.sh [requests (50000)] [concurrency (64)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

requests="${1:-50000}"
concurrency="${2:-64}"
port="${BENCH_PORT:-18480}"

scripts/bootstrap.sh
build_products push-relay push-relay-bench
bench_relay

machine_line
echo "PostgreSQL $("$bin/push-relay" version | sed -n 2p) client, fsync and synchronous_commit on"
ingest() { "$bin/push-relay-bench" ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" "$@"; }
# Busy CPU of the whole machine (relay, PostgreSQL and this load generator) over the closed loop,
# from /proc/stat: a figure that moves less between runs than throughput on a shared VM.
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
ingest --requests 5000 --concurrency "$concurrency" --warmup 0 >/dev/null
before=$(busy)
ingest --requests "$requests" --concurrency "$concurrency" --warmup 0
after=$(busy)
echo "  machine CPU $(( (after - before) * 1000000 / $(getconf CLK_TCK) / requests )) us per webhook (relay + PostgreSQL + load generator, all cores)"
ingest --requests 20000 --concurrency 32 --rate 1000
