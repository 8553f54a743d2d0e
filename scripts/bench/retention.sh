#!/usr/bin/env bash
# Retention benchmark: what dropping expired history partitions costs the webhooks that keep
# arriving meanwhile.
#
# Starts a relay (intake only, one app, retention off) on a fresh embedded durable PostgreSQL.
# Drops the empty `*_unpartitioned` tables 0019 kept (a relay's first retention run drops them),
# makes the four weekly partitions of each history table that end 98 days ago, as 0019 and
# retention make them, and fills them with ROWS deliveries (95 % delivered, 5 % failed) and ROWS/2
# notifications, each row in the partition of its day (ids D << 32 + n on day D, as intake
# allocates them); then VACUUM ANALYZE and a CHECKPOINT. Every row is past both retention ages (30
# and 90 days).
# Then three windows of SECONDS each, webhooks sent at RATE per second (open loop, latency from
# each request's scheduled time):
#   A. retention off;
#   B. retention on (the relay restarted with it): its first run detaches and drops the eight
#      partitions while the webhooks flow;
#   A. retention off again.
# It prints each window's latency percentiles, the retention run's log line (what it dropped and
# its seconds) and the rows left.
#
# Usage: scripts/bench/retention.sh [rows (10000000)] [rate (500)] [seconds (60)]; RELAY_BINARY
# and BENCH_BINARY: those builds of push-relay and push-relay-bench, not new ones.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

rows="${1:-10000000}"
rate="${2:-500}"
seconds="${3:-60}"
if ! [[ "$rows" =~ ^[1-9][0-9]*$ && "$rate" =~ ^[1-9][0-9]*$ && "$seconds" =~ ^[1-9][0-9]*$ ]] || ((rows < 2)); then usage; fi
port="${BENCH_PORT:-18490}"

scripts/bootstrap.sh
[ -n "${RELAY_BINARY:-}" ] || build_products push-relay
[ -n "${BENCH_BINARY:-}" ] || build_products push-relay-bench
bench="${BENCH_BINARY:-$bin/push-relay-bench}"

work_dir retention
bench_log_level=notice  # the run's "retention run finished" line
start_relay() { # retention enabled: true|false (the same data directory each time)
    relay_stop
    bench_yaml="retention:
  enabled: $1"
    bench_relay_config
    relay_start --config "$work/config.yaml" --data-dir "$work/data"
}
trap relay_stop EXIT

start_relay false
machine_line
echo "seeding $rows deliveries and $((rows / 2)) notifications in the 4 weeks that end 98 days ago ..."
start=$SECONDS
sql <<SQL
ALTER TABLE deliveries DETACH PARTITION deliveries_unpartitioned;
DROP TABLE deliveries_unpartitioned;
ALTER TABLE notifications DETACH PARTITION notifications_unpartitioned;
DROP TABLE notifications_unpartitioned;
DO \$\$
DECLARE
    tab text;
    first date;
    start date := (SELECT date '1970-01-01' + (min(lower) >> 32)::int FROM history_partitions);
BEGIN
    FOREACH tab IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
        FOR k IN 15 .. 18 LOOP
            first := start - 7 * k;
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s) WITH (fillfactor = %s)',
                tab || '_' || to_char(first, 'YYYYMMDD'), tab, push_relay_history_bound(first), push_relay_history_bound(first + 7),
                CASE tab WHEN 'deliveries' THEN 50 ELSE 100 END);
        END LOOP;
    END LOOP;
END \$\$;
-- Notification g at its time over the 28 days from the oldest partition's start, id D << 32 + g on
-- its day D; its deliveries 2g and 2g + 1 on the same day.
CREATE TEMP TABLE seeded AS
SELECT g, at, push_relay_history_bound((at AT TIME ZONE 'UTC')::date) AS lo
FROM generate_series(1, $rows / 2) g,
     LATERAL (SELECT (SELECT date '1970-01-01' + (min(lower) >> 32)::int FROM history_partitions)::timestamp AT TIME ZONE 'UTC'
                     + (g - 1) * (interval '28 days' - interval '1 second') / greatest($rows / 2 - 1, 1) AS at) t;
INSERT INTO notifications (id, app_id, ticket_id, title, body, received_at, first_delivery_id, last_delivery_id)
SELECT lo + g, 'bench', (g % 50000)::text, 'Agent replied', 'An old reply', at, lo + 2 * g, lo + 2 * g + 1 FROM seeded;
INSERT INTO deliveries (id, notification_id, app_id, device_token, platform, status, attempts, provider_id, next_attempt_at,
    created_at, updated_at, delivered_at)
SELECT lo + 2 * g + k, lo + g, 'bench', 'bench-old-' || ((2 * g + k) % 200000), CASE k WHEN 0 THEN 'ios' ELSE 'android' END,
       CASE WHEN (2 * g + k) % 20 = 0 THEN 'failed' ELSE 'delivered' END, 1, 'old-provider-id', at, at, at,
       CASE WHEN (2 * g + k) % 20 = 0 THEN NULL ELSE at END
FROM seeded, generate_series(0, 1) k;
-- The sweep has passed them, as it has a running relay's finished rows.
UPDATE delivery_sweep SET (swept_to, swept_id) = (
    SELECT next_attempt_at, id FROM deliveries WHERE NOT due ORDER BY next_attempt_at DESC, id DESC LIMIT 1);
VACUUM ANALYZE notifications;
VACUUM ANALYZE deliveries;
-- The seeding's writes reach the disk now, not during the first window.
CHECKPOINT;
SQL
echo "  seeded in $((SECONDS - start)) s: $(sql -At -c "SELECT count(*) || ' partitions per table, deliveries ' ||
    pg_size_pretty((SELECT sum(pg_total_relation_size(partition)) FROM history_partitions WHERE parent = 'deliveries')) || ' with indexes'
    FROM history_partitions WHERE parent = 'deliveries'")"

requests=$((rate * seconds))
window() { # label
    echo
    echo "window $1: $requests webhooks at $rate/s"
    "$bench" ingest --url "http://127.0.0.1:$port" --app bench --secret "$secret" --requests "$requests" --concurrency 32 --rate "$rate" \
        --warmup 200 | sed 's/^/  /'
}

window "A (retention off)"

start_relay true
window "B (retention on, dropping)"
until grep -q "retention run finished" "$work/relay.log"; do
    sleep 1
    if ((SECONDS > 7200)); then echo "the retention run did not finish" >&2; exit 1; fi
done
echo "  the retention run's log line:"
grep "retention run finished" "$work/relay.log" | tail -n 1 | sed 's/^/    /'

start_relay false
window "A (retention off, after the drops)"
echo
echo "left: $(sql -At -c "SELECT count(*) FROM deliveries") deliveries, $(sql -At -c "SELECT count(*) FROM notifications") notifications" \
    "(the windows' webhooks), $(sql -At -c "SELECT count(*) FROM history_partitions WHERE parent = 'deliveries'") partitions per table"
