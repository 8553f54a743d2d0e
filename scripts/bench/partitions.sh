#!/usr/bin/env bash
# Partitioned history (migration 0019): what the upgrade and a partition drop cost on a large
# database. psql and `push-relay migrate` against a throwaway PostgreSQL 15 cluster (fsync on,
# shared_buffers 256MB, autovacuum off).
#
# 1. A database gets Migrations/*.sql up to 0018 (each file in one transaction, recorded in
#    schema_migrations, as `push-relay migrate` applies them), then DELIVERIES delivered
#    deliveries and DELIVERIES/2 notifications (two devices each, 64-character tokens, one every
#    half second back from now), then VACUUM ANALYZE, and prints the two tables' sizes.
# 2. 0019 and the migrations after it (0020 adds two columns, a catalog change; 0021 builds an
#    index on the old `deliveries`, reading it once, and drops the partitioned one) applied by
#    `push-relay migrate` (RELAY_BINARY, or a release build made first), after a CHECKPOINT:
#    wall seconds, the server's CPU seconds and WAL bytes (its read of each table is from the
#    cache the seeding left warm).
# 3. What retention does with an expired partition, after a CHECKPOINT: DETACH PARTITION ...
#    CONCURRENTLY and DROP TABLE of `deliveries_unpartitioned`, then of
#    `notifications_unpartitioned`, as `HistoryPartitions.drop` sends them: wall seconds, the
#    server process's CPU seconds (user and system, from /proc) and WAL bytes.
# 10,000,000 deliveries seed in about 6.5 minutes on 2 cores and take about 7 GB of disk.
#
# Usage: scripts/bench/partitions.sh [deliveries (10000000)]; RELAY_BINARY=path: that build, not a
# new one (any build: the migration's cost is the server's).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

deliveries="${1:-10000000}"
if ! [[ "$deliveries" =~ ^[1-9][0-9]*$ ]] || ((deliveries < 2)); then usage; fi
[ -n "${RELAY_BINARY:-}" ] || build_products push-relay
bench_cluster partitions "shared_buffers = 256MB" "autovacuum = off" "maintenance_work_mem = 1GB" "max_wal_size = 16GB" \
    "checkpoint_timeout = 30min"
export PGOPTIONS="-c TimeZone=UTC"
psql_db() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U bench -d bench "$@"; }
psql -X -q -h 127.0.0.1 -p "$port" -U bench -d postgres -c "CREATE DATABASE bench"

machine_line
bench_migrate bench 18
echo "seeding $deliveries deliveries and $((deliveries / 2)) notifications at schema 0018 ..."
start=$SECONDS
psql_db <<SQL
INSERT INTO notifications (app_id, ticket_id, title, body, received_at)
SELECT 'app' || (g % 3), (g % 200000)::text, 'Agent replied', 'A reply of some length that a helpdesk agent would write',
       now() - g * interval '1 second'
FROM generate_series(1, $((deliveries / 2))) g;
INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, attempts, provider_id, created_at, updated_at, delivered_at)
SELECT (g + 1) / 2, 'app' || (g % 3), md5(g::text) || md5((g + 1)::text), CASE WHEN g % 2 = 0 THEN 'ios' ELSE 'android' END,
       'delivered', 1, md5(g::text), now() - g * interval '0.5 second', now() - g * interval '0.5 second', now() - g * interval '0.5 second'
FROM generate_series(1, $deliveries) g;
VACUUM ANALYZE notifications;
VACUUM ANALYZE deliveries;
SQL
echo "  $((SECONDS - start)) s; $(psql_db -At -c "SELECT 'deliveries ' || pg_size_pretty(pg_total_relation_size('deliveries')) || ', notifications ' || pg_size_pretty(pg_total_relation_size('notifications'))")"

timed() { # label, then the SQL on standard input
    local label="$1" lsn before after ticks
    psql_db -c "CHECKPOINT"
    lsn="$(psql_db -At -c "SELECT pg_current_wal_insert_lsn()")"
    before="$(date +%s.%N)"
    # The server process's CPU ticks (utime + stime) before and after, read by psql's shell escape.
    { echo "SELECT pg_backend_pid() AS backend \\gset"
      echo "\\setenv BACKEND :backend"
      echo "\\! awk '{print \$14 + \$15}' /proc/\$BACKEND/stat >$work/ticks"
      cat
      echo "\\! awk '{print \$14 + \$15}' /proc/\$BACKEND/stat >>$work/ticks"; } | psql_db >/dev/null
    after="$(date +%s.%N)"
    ticks="$(awk 'NR == 1 { a = $1 } NR == 2 { print ($1 - a) / '"$(getconf CLK_TCK)"' }' "$work/ticks")"
    echo "$label: $(echo "$after - $before" | bc) s wall, $ticks s of server CPU," \
        "$(psql_db -At -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn')") bytes of WAL"
}
# 0019 and later by `push-relay migrate`, its own connections: the server's CPU is the whole cluster's
# (postgres_seconds), otherwise idle.
psql_db -c "CHECKPOINT"
lsn="$(psql_db -At -c "SELECT pg_current_wal_insert_lsn()")"
postmaster="$(head -1 "$cluster/postmaster.pid")"
cpu_before="$(postgres_seconds "$postmaster")" before="$(date +%s.%N)"
DATABASE_URL="postgresql://bench@127.0.0.1:$port/bench" "$relay_binary" migrate --log-level notice 2>&1 | sed 's/^/  /'
after="$(date +%s.%N)"
# Read once its backends have exited (up to a minute after its own exit): a backend ending while
# /proc is read could be counted live and again in the postmaster's count of its children.
for _ in $(seq 600); do
    [ "$(psql_db -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" -gt 0 ] ||
        break
    sleep 0.1
done
echo "0019 (partitioning) and later by push-relay migrate: $(echo "$after - $before" | bc) s wall," \
    "$(awk -v a="$cpu_before" -v b="$(postgres_seconds "$postmaster")" 'BEGIN { print b - a }') s of server CPU," \
    "$(psql_db -At -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn')") bytes of WAL;" \
    "schema $(psql_db -At -c "SELECT max(version) FROM schema_migrations")"
echo "  rows after: $(psql_db -At -c "SELECT (SELECT count(*) FROM deliveries) || ' deliveries, ' || (SELECT count(*) FROM notifications) || ' notifications'")"
timed "dropping both unpartitioned tables" <<'SQL'
ALTER TABLE "deliveries" DETACH PARTITION "deliveries_unpartitioned" CONCURRENTLY;
DROP TABLE IF EXISTS "deliveries_unpartitioned";
ALTER TABLE "notifications" DETACH PARTITION "notifications_unpartitioned" CONCURRENTLY;
DROP TABLE IF EXISTS "notifications_unpartitioned";
SQL
