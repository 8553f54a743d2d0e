#!/usr/bin/env bash
# Retention benchmark: what pruning a large backlog of old deliveries costs the webhooks that keep
# arriving meanwhile.
#
# Builds release binaries and starts a relay (intake only, one app) on a fresh embedded durable
# PostgreSQL. Seeds ROWS deliveries finished 120 days ago (95 % delivered, 5 % failed: all past
# the default retention) and ROWS/2 notifications, then prints EXPLAIN ANALYZE of the status
# API's three queries on that table. Then three windows of SECONDS each, webhooks sent at RATE per
# second (open loop, latency from each request's scheduled time):
#   A. retention off;
#   B. retention on (relay restarted with it), pruning the backlog while the webhooks flow;
#   A. retention off again (after pruning is over).
# It prints each window's latency percentiles, the rows pruned during window B, and how long the
# whole prune took (from the relay's metrics).
#
# Usage: scripts/bench/retention.sh [rows] [rate] [seconds] [batch_size] [batch_pause_ms]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

rows="${1:-10000000}"
rate="${2:-500}"
seconds="${3:-60}"
batch_size="${4:-2000}"
batch_pause_ms="${5:-50}"
port="${BENCH_PORT:-18490}"

scripts/bootstrap.sh
build_products push-relay push-relay-bench
bench="$bin/push-relay-bench"

work_dir retention
bench_log_level=notice  # the prune's "retention run finished" line
start_relay() { # retention enabled: true|false (the same data directory each time)
    relay_stop
    bench_yaml="retention:
  enabled: $1
  batch_size: $batch_size
  batch_pause_ms: $batch_pause_ms"
    bench_relay_config
    relay_start --config "$work/config.yaml" --data-dir "$work/data"
}

start_relay false
machine_line
echo "seeding $rows deliveries finished 120 days ago and $((rows / 2)) notifications ..."
start=$SECONDS
sql <<SQL
INSERT INTO notifications (id, app_id, ticket_id, title, body, received_at) OVERRIDING SYSTEM VALUE
SELECT g, 'bench', (g % 50000)::text, 'Agent replied', 'An old reply', now() - interval '120 days' + g * interval '1 ms'
FROM generate_series(1, $rows / 2) g;
SELECT setval('notifications_id_seq', $rows / 2);
INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, attempts, provider_id, created_at, updated_at, delivered_at)
SELECT (g + 1) / 2, 'bench', 'bench-old-' || (g % 200000), CASE WHEN g % 2 = 0 THEN 'android' ELSE 'ios' END,
       CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'delivered' END, 1, 'old-provider-id',
       now() - interval '120 days' + g * interval '0.5 ms', now() - interval '120 days' + g * interval '0.5 ms',
       CASE WHEN g % 20 = 0 THEN NULL ELSE now() - interval '120 days' + g * interval '0.5 ms' END
FROM generate_series(1, $rows) g;
VACUUM ANALYZE notifications;
VACUUM ANALYZE deliveries;
SQL
echo "  seeded in $((SECONDS - start)) s; deliveries table $(sql -At -c "SELECT pg_size_pretty(pg_total_relation_size('deliveries'))") with indexes"

echo
echo "status API plans at $rows deliveries (generic plans, as the relay's prepared statements run them):"
probe_notification=$((rows / 4))
sql <<SQL
SET plan_cache_mode = force_generic_plan;
PREPARE one_notification(bigint, text) AS
    SELECT d.id, d.status FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE d.notification_id = \$1 AND n.app_id = \$2 ORDER BY d.id LIMIT 1000;
PREPARE ticket_page(text, text, bigint, int) AS
    SELECT * FROM notifications WHERE app_id = \$1 AND ticket_id = \$2 AND id < coalesce(\$3::bigint, 9223372036854775807) ORDER BY id DESC LIMIT \$4;
PREPARE device_page(text, text, bigint, int) AS
    SELECT * FROM deliveries WHERE app_id = \$1 AND hashtextextended(device_token, 0) = hashtextextended(\$2, 0) AND device_token = \$2
      AND id < coalesce(\$3::bigint, 9223372036854775807) ORDER BY id DESC LIMIT \$4;
\echo '--- GET /v1/apps/bench/notifications/$probe_notification (its deliveries)'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) EXECUTE one_notification($probe_notification, 'bench');
\echo '--- GET /v1/apps/bench/tickets/4242/notifications?limit=50'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) EXECUTE ticket_page('bench', '4242', NULL, 51);
\echo '--- GET /v1/apps/bench/devices/bench-old-4242/deliveries?limit=50'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) EXECUTE device_page('bench', 'bench-old-4242', NULL, 51);
SQL

requests=$((rate * seconds))
window() { # label
    echo
    echo "window $1: $requests webhooks at $rate/s"
    $bench ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency 32 --rate "$rate" --warmup 200 \
        | sed 's/^/  /'
}
pruned() { # table
    curl -s "http://127.0.0.1:$port/metrics" | awk -v t="$1" '$1 ~ "^push_relay_retention_pruned_rows_total" && $1 ~ "table=\"" t "\"" {print $2; found=1} END {if (!found) print 0}'
}

window "A (retention off)"

start_relay true
prune_start=$(date +%s.%N)
window "B (retention on, pruning)"
echo "  pruned during window B: $(pruned deliveries) deliveries, $(pruned notifications) notifications"
while ! grep -q "retention run finished" "$work/relay.log"; do
    sleep 1
    if [ "$SECONDS" -gt 7200 ]; then echo "pruning did not finish" >&2; exit 1; fi
done
prune_end=$(date +%s.%N)
echo "  whole prune: $(pruned deliveries) deliveries and $(pruned notifications) notifications; the run's log line:"
grep "retention run finished" "$work/relay.log" | tail -n 1 | sed 's/^/    /'
echo "  (from the relay's start to the log line seen: $(echo "$prune_end - $prune_start" | bc) s)"

start_relay false
window "A (retention off, after pruning)"
echo
echo "left: $(sql -At -c "SELECT count(*) FROM deliveries") deliveries, $(sql -At -c "SELECT count(*) FROM notifications") notifications (the windows' webhooks)"
