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

work="$(mktemp -d /tmp/push-relay-bench.XXXXXX)"
chmod 755 "$work"
secret="bench-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat > "$work/config.yaml" <<YAML
http:
  port: $port
log:
  level: warning
apps:
  - id: bench
    webhook_secrets: ["$secret"]
YAML

.build/release/push-relay serve --config "$work/config.yaml" --data-dir "$work/data" > "$work/relay.log" 2>&1 &
relay=$!
cleanup() {
    kill -TERM "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/ready" >/dev/null; then break; fi
    sleep 0.5
done
curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { echo "relay did not become ready:" >&2; cat "$work/relay.log" >&2; exit 1; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; PostgreSQL $(.build/release/push-relay version | sed -n 2p) client, fsync and synchronous_commit on"
bench=.build/release/push-relay-bench
$bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency "$concurrency"
$bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests 20000 --concurrency 32 --rate 1000
