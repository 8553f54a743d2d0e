#!/usr/bin/env bash
# The deliveries table's layout at the SQL level: what PostgreSQL spends per delivery on the two
# statements every push goes through (intake stores it claimed, the outcome marks it delivered), for
# layouts of issue 47, item 1, on a fresh durable cluster each run (ratios are to status-due's):
# - status-due: the layout before migration 0015 (primary key; due, whose predicate reads `status`,
#   so the outcome is never a HOT update; by notification; by device hash);
# - due-table: the due set in a narrow table of its own, inserted at intake and deleted with the
#   outcome; `deliveries` with fillfactor 50, so the outcome can be HOT;
# - no-due-entry: a fresh delivery in no due set at all (only retries would be), fillfactor 50: the
#   bound for a layout where the due index never sees a delivery that succeeds at once;
# - due-flag: migration 0015's (the due index reads `due`, a fresh delivery is not due and is in
#   `deliveries_unswept`; fillfactor 50), with the relay's sweep every 16 batches.
# Batches of 32 deliveries, one client; the outcome four batches after the intake, with
# synchronous_commit off as the relay's. CPU is every PostgreSQL process's (backends, autovacuum,
# the closing VACUUM and CHECKPOINT), WAL from its position; the variants alternate by round.
# Usage: [LAYOUTS='status-due …'] scripts/bench/deliveries-layout.sh [rounds (4)] [batches per run (4000)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

rounds="${1:-4}" batches="${2:-4000}" layouts="${LAYOUTS:-status-due due-table no-due-entry due-flag}"
[[ "$rounds" =~ ^[1-9][0-9]*$ && "$batches" =~ ^[1-9][0-9]*$ ]] || usage
pg_bin="${PUSH_RELAY_PG_BIN:-$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort -V | tail -n 1)}"
[ -x "$pg_bin/initdb" ] || { log "no PostgreSQL server programs (set PUSH_RELAY_PG_BIN)"; exit 1; }
work_dir deliveries-layout
cluster="$work/pg"
trap 'stop_cluster; cleanup' EXIT

# One run: prints "variant cpu_us wal_bytes hot_share".
run() {
    local variant="$1" port pm lsn0 lsn1 cpu0 cpu1 hot
    stop_cluster
    rm -rf "$cluster"
    mkdir -p "$cluster"
    [ "$(id -u)" -ne 0 ] || chown postgres "$cluster"
    as_postgres "$pg_bin/initdb" -D "$cluster" -A trust -U bench >/dev/null
    port="${BENCH_PORT:-$(free_port)}"
    printf '%s\n' "port = $port" "listen_addresses = '127.0.0.1'" "unix_socket_directories = ''" \
        "shared_buffers = 256MB" "max_wal_size = 4GB" >>"$cluster/postgresql.conf"
    as_postgres "$pg_bin/pg_ctl" -D "$cluster" -l "$cluster/server.log" -w start >/dev/null
    local psql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U bench -d postgres)
    "${psql[@]}" <<'SQL'
CREATE SEQUENCE batches;
CREATE TABLE deliveries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, notification_id bigint, app_id text NOT NULL,
    device_token text NOT NULL, platform text NOT NULL, kind text NOT NULL DEFAULT 'alert',
    status text NOT NULL DEFAULT 'pending', attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(), lease_owner text, lease_expires_at timestamptz,
    provider_id text, last_error text, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), delivered_at timestamptz
);
CREATE INDEX deliveries_by_notification ON deliveries (notification_id);
CREATE INDEX deliveries_by_device_hash ON deliveries (app_id, hashtextextended(device_token, 0), id);
SQL
    local fresh="INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, lease_owner, lease_expires_at, next_attempt_at)
SELECT :k * 32 + g, 'support', md5(random()::text) || md5(random()::text), 'ios', 'sending', 'me', now() + interval '1 minute',
    now() + interval '1 minute' FROM generate_series(1, 32) g"
    local batch="d.id > (:k - 4) * 32 AND d.id <= (:k - 3) * 32"
    local outcome="UPDATE deliveries d SET status = 'delivered', provider_id = md5(d.id::text), last_error = NULL, attempts = d.attempts + 1,
    lease_owner = NULL, lease_expires_at = NULL, delivered_at = now(), updated_at = now() WHERE $batch AND d.lease_owner = 'me'"
    local intake_sql="$fresh;" outcome_sql="$outcome;" sweep=""
    case "$variant" in
    status-due) "${psql[@]}" -c "CREATE INDEX deliveries_due ON deliveries (app_id, next_attempt_at) WHERE status IN ('pending', 'sending')" ;;
    due-table)
        "${psql[@]}" -c "ALTER TABLE deliveries SET (fillfactor = 50)" \
            -c "CREATE TABLE delivery_due (id bigint PRIMARY KEY, app_id text NOT NULL, next_attempt_at timestamptz NOT NULL)" \
            -c "CREATE INDEX delivery_due_by_time ON delivery_due (app_id, next_attempt_at)"
        intake_sql="WITH fresh AS ($fresh RETURNING id, app_id, next_attempt_at) INSERT INTO delivery_due SELECT * FROM fresh;"
        outcome_sql="WITH gone AS (DELETE FROM delivery_due d WHERE $batch) $outcome;"
        ;;
    no-due-entry) "${psql[@]}" -c "ALTER TABLE deliveries SET (fillfactor = 50)" ;;
    due-flag)
        "${psql[@]}" -c "ALTER TABLE deliveries SET (fillfactor = 50)" \
            -c "ALTER TABLE deliveries ADD COLUMN due boolean NOT NULL DEFAULT true" \
            -c "CREATE INDEX deliveries_due ON deliveries (app_id, next_attempt_at) WHERE due" \
            -c "CREATE INDEX deliveries_unswept ON deliveries (next_attempt_at, id) WHERE NOT due" \
            -c "CREATE TABLE sweep (swept_to timestamptz NOT NULL, swept_id bigint NOT NULL)" \
            -c "INSERT INTO sweep VALUES ('-infinity', 0)"
        intake_sql="${fresh/platform, status,/platform, due, status,}"
        intake_sql="${intake_sql/\'ios\', \'sending\'/\'ios\', false, \'sending\'}"
        # Due at once (the lease's end, in the relay): so the sweep visits each row during the run.
        intake_sql="${intake_sql/$'\n'    now() + interval \'1 minute\' FROM/ now() FROM};"
        # The relay's sweep (Sources/PushRelay/Outbox/DeliveryQueue+Sweep.swift), every 16 batches.
        sweep="WITH mark AS MATERIALIZED (SELECT * FROM sweep LIMIT 1 FOR UPDATE), visited AS MATERIALIZED (
    SELECT d.* FROM mark CROSS JOIN LATERAL (SELECT id, next_attempt_at, status FROM deliveries
        WHERE NOT due AND (next_attempt_at, id) > (mark.swept_to, mark.swept_id) AND next_attempt_at < now() - interval '100 ms'
        ORDER BY next_attempt_at, id LIMIT 10000) d),
made_due AS (UPDATE deliveries d SET due = true WHERE d.id = ANY (ARRAY(SELECT id FROM visited WHERE status IN ('pending', 'sending')))
    AND NOT d.due AND d.status IN ('pending', 'sending') RETURNING 1)
UPDATE sweep SET (swept_to, swept_id) = (SELECT next_attempt_at, id FROM visited ORDER BY next_attempt_at DESC, id DESC LIMIT 1)
WHERE EXISTS (SELECT 1 FROM visited) AND (SELECT count(*) FROM made_due) >= 0;"
        ;;
    esac
    printf '%s\n' "SELECT nextval('batches') - 1 AS k \\gset" "${intake_sql//$'\n'/ }" "BEGIN;" \
        "SET LOCAL synchronous_commit = off;" "${outcome_sql//$'\n'/ }" "COMMIT;" >"$work/script.sql"
    [ -z "$sweep" ] || printf '%s\n' "\\set swept :k % 16" "\\if :swept = 0" "${sweep//$'\n'/ }" "\\endif" >>"$work/script.sql"
    "${psql[@]}" -c "CHECKPOINT"
    pm="$(head -n 1 "$cluster/postmaster.pid")"
    lsn0="$("${psql[@]}" -At -c "SELECT pg_current_wal_lsn()")"
    cpu0="$(postgres_seconds "$pm")"
    pgbench -h 127.0.0.1 -p "$port" -U bench -n -c 1 -t "$batches" -f "$work/script.sql" postgres >/dev/null
    "${psql[@]}" -c "VACUUM"
    "${psql[@]}" -c "CHECKPOINT"
    cpu1="$(postgres_seconds "$pm")"
    lsn1="$("${psql[@]}" -At -c "SELECT pg_current_wal_lsn()")"
    hot="$("${psql[@]}" -At -c "SELECT round(n_tup_hot_upd::numeric / greatest(n_tup_upd, 1), 2) FROM pg_stat_user_tables WHERE relname = 'deliveries'")"
    "${psql[@]}" -At -c "SELECT '$variant', round(($cpu1 - $cpu0)::numeric / ($batches * 32) * 1e6, 1),
        round(pg_wal_lsn_diff('$lsn1', '$lsn0') / ($batches * 32)), $hot" | tr '|' ' '
}

machine_line
echo "runs: variant, PostgreSQL CPU µs per delivery, WAL bytes per delivery, share of the outcome updates that were HOT"
results=()
for round in $(seq "$rounds"); do
    # shellcheck disable=SC2086  # a list of words
    for variant in $(alternate "$round" $layouts); do
        line="$(run "$variant")"
        echo "  round $round: $line"
        results+=("$round $line")
    done
done
# Per round, each variant's CPU over status-due's in the same round; the median of those.
printf '%s\n' "${results[@]}" | python3 -c "$(
    cat <<'PY'
import statistics, sys
runs = [line.split() for line in sys.stdin]
baseline = "status-due"
baseline_cpu = {r[0]: float(r[2]) for r in runs if r[1] == baseline}
base = statistics.median(float(r[3]) for r in runs if r[1] == baseline)
for variant in dict.fromkeys(r[1] for r in runs if r[1] != baseline):
    ratios = [float(r[2]) / baseline_cpu[r[0]] for r in runs if r[1] == variant]
    wal = statistics.median(float(r[3]) for r in runs if r[1] == variant)
    per_round = " ".join(f"{x:.2f}" for x in ratios)
    print(f"{variant}: CPU per delivery / {baseline}'s, per round {per_round}, median {statistics.median(ratios):.2f}; WAL {wal:.0f} / {base:.0f} bytes")
PY
)"
