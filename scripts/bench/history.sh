#!/usr/bin/env bash
# History benchmark: how the cost of the relay's operator-facing reads and of retention grows with
# the history kept, on today's schema (notifications and deliveries partitioned by id range, a
# partition per 7 days, migration 0019). SQL only: nothing is built and no relay runs; psql
# against a throwaway PostgreSQL 15 cluster (fsync on, shared_buffers 256MB, autovacuum off so
# runs repeat: VACUUM ANALYZE is explicit).
#
# 1. Two databases get Migrations/*.sql as `push-relay migrate` applies them (each file in one
#    transaction, recorded in schema_migrations with its md5): `history` and `empty`. In both, the
#    empty `*_unpartitioned` tables are dropped, as a relay's first retention run drops them, and
#    the partitions of the past 126 days are made as push_relay_extend_history makes partitions
#    ahead: 21 per table, as a relay that has kept 120 days has.
# 2. Both get the same registry and live set: 3 apps of 300 devices (150 users) each, the third app
#    `encrypted` (text erased once its deliveries ended), 40 jobs (one every 3 days, the last queued
#    with its upload) with their Zendesk tokens, provider tokens; and, after VACUUM ANALYZE, a tail
#    of up to 1,500 notifications in the last 5 minutes (a third of their deliveries pending, a
#    third sending), the events of its ended deliveries waiting for a receiver, unread counts,
#    activity minutes and the sweep's watermark as a running relay leaves them; its tickets have 8
#    replies each, as the history's, so a ticket's page is the same size in both. `history` alone
#    also holds the history, seeded before the VACUUM: about DELIVERIES deliveries and
#    DELIVERIES/2.02 notifications over 120 days (1-3 devices per notification, a badge sync per 50
#    notifications; 92 % delivered, 3 % failed, 2 % dead_token, 1 % expired, 2 % skipped), each row
#    in the partition of the day it was stored (its id D << 32 + n on day D, as the relay allocates
#    them). So `empty` is `history` without its history of pushes: a query's ratio is what that
#    history costs it.
# 3. Each operator-facing query, its SQL as in the Swift source (interpolations expanded; the
#    script warns when a fragment is no longer in its file), prepared as the relay prepares it
#    (untyped parameters, plan_cache_mode force_custom_plan), runs RUNS times per database with
#    parameters sampled from that database's notifications (in `history` those of the 118 days
#    before today, in `empty` the tail's) and from the rows both hold alike (devices, users, jobs;
#    the same in both): p50 and p99 of EXPLAIN ANALYZE's execution time (TIMING OFF), empty and
#    seeded, interleaved per query (a query stops early past 60 s of runs). Then EXPLAIN (ANALYZE,
#    BUFFERS) of each on `history` once.
# 4. Retention as RetentionService.runOnce runs it (every step in order, its statements, batch
#    2000, 50 ms pause, a commit per statement; partitions checked and dropped as
#    HistoryPartitions does: DETACH PARTITION ... CONCURRENTLY, then DROP TABLE), with
#    delivered_days = failed_days = jobs_days = zendesk_forwarded_days = D and
#    delivery.max_age_seconds 86400 (a partition goes when its newest row is D days and a day
#    old): first D = 118 (the oldest partition, one day of rows), then D = 88 (four more weeks),
#    each after a CHECKPOINT: for the drops and for the whole run, wall seconds, the server
#    process's CPU seconds (user and system, from /proc) and WAL bytes.
# 5. The table (query, empty p50/p99, seeded p50/p99, ratio, buffers, p50 planning times, the
#    ratio with planning), the retention figures, the size of each table (its partitions summed,
#    before retention) and the bytes per delivery.
# 10,000,000 deliveries seed in about 5 minutes on 2 cores (the whole run takes about 8) and take about 9 GB of disk.
#
# Huge pages: the cluster has `huge_pages = $HUGE_PAGES` (default try, PostgreSQL's own default: the
# kernel's pool of 2 MB pages if it has room, else normal pages); the header says which it got.
# A lookup of a random old row touches pages spread over shared_buffers, and with 4 kB pages each is
# a TLB miss as well as a cache miss: reserve a pool as a production host would, e.g.
# `sysctl -w vm.nr_hugepages=200` (400 MB) before the run, or HUGE_PAGES=on to fail without one.
#
# Usage: [HUGE_PAGES=try|on|off] scripts/bench/history.sh [deliveries (10000000)] [runs per query (200)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

deliveries="${1:-10000000}" runs="${2:-200}"
if ! [[ "$deliveries" =~ ^[1-9][0-9]*$ && "$runs" =~ ^[1-9][0-9]*$ ]] || ((deliveries < 20000)); then usage; fi
retention_batch=2000 retention_pause_ms=50  # RetentionSettings' defaults
query_budget_seconds=60  # a query stops after the run that passes this (the table says how many ran)
huge_pages="${HUGE_PAGES:-try}"
case "$huge_pages" in try | on | off) ;; *) usage ;; esac

# --- A bare cluster ------------------------------------------------------------------------------
bench_cluster history "shared_buffers = 256MB" "autovacuum = off" "maintenance_work_mem = 1GB" "max_wal_size = 16GB" \
    "checkpoint_timeout = 30min" "huge_pages = $huge_pages"
# Whether the server's shared memory got huge pages: the postmaster's mappings backed by 2 MB pages.
shared_memory_pages() {
    local sizes
    sizes="$(awk '/^KernelPageSize:/ { print $2 }' "/proc/$(head -1 "$cluster/postmaster.pid")/smaps" 2>/dev/null | sort -nu)"
    if [ -z "$sizes" ]; then
        echo "pages of a size not known (the server's /proc/PID/smaps is not readable)"
    elif [ "$(tail -1 <<<"$sizes")" -ge 2048 ]; then
        echo "huge pages"
    else
        echo "4 kB pages"
    fi
}
pages="$(shared_memory_pages)"
# The relay's session settings (LibPQConnection): UTC, prepared statements planned per execution, no JIT.
export PGOPTIONS="-c TimeZone=UTC -c plan_cache_mode=force_custom_plan -c jit=off -c max_parallel_workers_per_gather=0"
psql_db() { # database, psql arguments
    local db="$1"
    shift
    psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U bench -d "$db" "$@"
}

machine_line
echo "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}'), shared_buffers 256MB in $pages (huge_pages = $huge_pages)," \
    "fsync on, autovacuum off; $deliveries deliveries, $runs runs per query"
for db in history empty; do psql_db postgres -c "CREATE DATABASE $db"; bench_migrate "$db"; done
echo "schema: $(psql_db history -At -c "SELECT count(*) || ' migrations, up to ' || max(version) FROM schema_migrations")"

# --- Partitions ----------------------------------------------------------------------------------
# The empty tables 0019 renamed go, as a relay's first retention run drops them; both databases get
# the partitions of the 126 days before the first one 0019 made (18 weeks: the history spans 120
# days), so that `empty` differs from `history` by the rows alone.
for db in history empty; do
    psql_db "$db" -c "ALTER TABLE deliveries DETACH PARTITION deliveries_unpartitioned" -c "DROP TABLE deliveries_unpartitioned" \
        -c "ALTER TABLE notifications DETACH PARTITION notifications_unpartitioned" -c "DROP TABLE notifications_unpartitioned"
    psql_db "$db" <<'SQL'
DO $$
DECLARE
    tab text;
    part text;
    first date;
    start date := (SELECT date '1970-01-01' + (min(lower) >> 32)::int FROM history_partitions);
BEGIN
    FOREACH tab IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
        FOR k IN REVERSE 18 .. 1 LOOP
            first := start - 7 * k;
            part := tab || '_' || to_char(first, 'YYYYMMDD');
            -- Made at once (nothing runs meanwhile), with the fillfactor push_relay_extend_history gives.
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s) WITH (fillfactor = %s)', part, tab,
                push_relay_history_bound(first), push_relay_history_bound(first + 7), CASE tab WHEN 'deliveries' THEN 50 ELSE 100 END);
        END LOOP;
    END LOOP;
END $$;
SQL
done
echo "partitions: $(psql_db history -At -c "SELECT count(*) || ' per table in history, ' || min(partition) || ' to ' || max(partition) FROM history_partitions WHERE parent = 'deliveries'"); $(psql_db empty -At -c "SELECT count(*) FROM history_partitions WHERE parent = 'deliveries'") in empty"

# --- Seeding -------------------------------------------------------------------------------------
notifications=$((deliveries * 50 / 101))  # 2 alerts (1-3 devices) per notification, a badge sync per 50
tail=$((notifications / 20 < 1500 ? notifications / 20 : 1500))
history_notifications=$((notifications - tail))
echo
echo "seeding about $deliveries deliveries and $notifications notifications over 120 days ..."
seed_start=$SECONDS
# Shared by both seeding steps: the apps, the devices (slot = app * 450 + user * 3 + k, k <= 1 +
# user % 3), a notification's ticket, app and user from its number n (a ticket's 8 replies spread
# over 4,096 notifications), and delivery texts.
common_sql="
CREATE TEMP TABLE devs (slot int PRIMARY KEY, app_id text, token text, platform text, user_id text);
INSERT INTO devs
SELECT a * 450 + u * 3 + k, (ARRAY['acme', 'globex', 'initech'])[a + 1],
       CASE WHEN (u + k) % 3 = 0
            THEN left(md5('f' || a || ':' || u || ':' || k), 22) || ':APA91b' || md5('g' || a || u || k) || md5('h' || a || u || k)
                 || md5('i' || a || u || k) || left(md5('j' || a || u || k), 27)
            ELSE encode(sha256(convert_to(a || ':' || u || ':' || k, 'UTF8')), 'hex') END,
       CASE WHEN (u + k) % 3 = 0 THEN 'android' ELSE 'ios' END, 'zd-' || (361000000 + a * 1000 + u)
FROM generate_series(0, 2) a, generate_series(0, 149) u, generate_series(1, 3) k WHERE k <= 1 + u % 3;
CREATE FUNCTION pg_temp.ticket(n bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT (n / 4096) * 512 + n % 512';
CREATE FUNCTION pg_temp.ticket_id(n bigint) RETURNS text IMMUTABLE LANGUAGE sql AS 'SELECT (48000000 + pg_temp.ticket(n))::text';
CREATE FUNCTION pg_temp.day_id(at timestamptz, k bigint) RETURNS bigint STABLE LANGUAGE sql
    AS 'SELECT push_relay_history_bound((at AT TIME ZONE ''UTC'')::date) + k';
"
# A notification's id is pg_temp.day_id(its time, n) and its deliveries' ids pg_temp.day_id(their
# time, 4 n + 0..3): the relay's ids, D << 32 plus a sequence on day D (ids below 2^32 a day).
# Deliveries of notifications \$lo..\$hi (received at pg_temp.at(n)), in the order intake stores
# them (ids grow with time, as retention expects). Terminal rows look like outcomes of claims made
# at intake (next_attempt_at the lease's end); the tail (\$tail_from on) is a third pending, a third
# sending, a third delivered.
deliveries_sql() { # lo hi tail_from
    cat <<SQL
INSERT INTO deliveries (id, notification_id, app_id, device_token, platform, kind, due, status, attempts, next_attempt_at,
    lease_owner, lease_expires_at, provider_id, last_error, created_at, updated_at, delivered_at)
SELECT pg_temp.day_id(x.at, n * 4 + CASE WHEN x.badge THEN 3 ELSE x.k - 1 END), CASE WHEN x.badge THEN NULL ELSE pg_temp.day_id(pg_temp.at(n), n) END, d.app_id, d.token, d.platform, CASE WHEN x.badge THEN 'badge_sync' ELSE 'alert' END,
    s.due, s.status, s.attempts, s.next_at, s.lease_owner, s.lease_end,
    CASE WHEN s.status <> 'delivered' THEN NULL
         WHEN d.platform = 'ios' THEN upper(md5(n::text || x.k)::uuid::text)
         ELSE 'projects/' || d.app_id || '-mobile/messages/0:' || (1764000000000000 + n * 4 + x.k) || '%' || left(md5(n::text || x.k), 16) END,
    s.error, x.at, s.updated_at, CASE WHEN s.status = 'delivered' THEN s.updated_at END
FROM generate_series($1::bigint, $2::bigint) n
CROSS JOIN LATERAL (SELECT pg_temp.ticket(n) AS t) tk
CROSS JOIN LATERAL (
    SELECT k, false AS badge, pg_temp.at(n) AS at FROM generate_series(1, 1 + ((tk.t / 3) % 150)::int % 3) k
    UNION ALL SELECT 1, true, pg_temp.at(n) + interval '1 ms' WHERE n % 50 = 0
) x
CROSS JOIN LATERAL (SELECT * FROM devs WHERE slot = (tk.t % 3) * 450 + ((tk.t / 3) % 150) * 3 + x.k) d
CROSS JOIN LATERAL (SELECT (n * 7 + x.k * 13) % 100 AS h, (n + x.k) % 6 AS r) m
CROSS JOIN LATERAL (
    SELECT CASE WHEN n < $3 THEN
                CASE WHEN m.h < 92 OR x.badge THEN 'delivered' WHEN m.h < 95 THEN 'failed' WHEN m.h < 97 THEN 'dead_token'
                     WHEN m.h < 98 THEN 'expired' ELSE 'skipped' END
           ELSE (ARRAY['delivered', 'delivered', 'pending', 'pending', 'sending', 'sending'])[m.r + 1] END AS status
) st
CROSS JOIN LATERAL (
    SELECT st.status,
           st.status IN ('pending', 'sending') AND NOT (st.status = 'sending' AND m.r = 4) AS due,
           CASE st.status WHEN 'expired' THEN 12 WHEN 'skipped' THEN 0 WHEN 'pending' THEN CASE WHEN m.r = 3 THEN 2 ELSE 0 END ELSE 1 END
               AS attempts,
           CASE st.status WHEN 'pending' THEN CASE WHEN m.r = 3 THEN now() + interval '20 seconds' ELSE x.at END
                          WHEN 'sending' THEN now() + interval '45 seconds'
                          WHEN 'expired' THEN x.at + interval '20 minutes'
                          ELSE x.at + interval '60 seconds' END AS next_at,
           CASE WHEN st.status = 'sending' THEN 'relay-2.internal:4711:delivery' END AS lease_owner,
           CASE WHEN st.status = 'sending' THEN now() + interval '45 seconds' END AS lease_end,
           CASE st.status
               WHEN 'failed' THEN CASE WHEN d.platform = 'ios' THEN 'APNs 400 BadTopic' ELSE 'FCM 400 INVALID_ARGUMENT: Request contains an invalid argument.' END
               WHEN 'dead_token' THEN CASE WHEN d.platform = 'ios' THEN 'APNs 410 Unregistered' ELSE 'FCM 404 UNREGISTERED: Requested entity was not found.' END
               WHEN 'expired' THEN 'older than the maximum age'
               WHEN 'skipped' THEN 'device is invalid or unregistered'
               WHEN 'pending' THEN CASE WHEN m.r = 3 THEN 'APNs 503 ServiceUnavailable' END END AS error,
           CASE st.status WHEN 'expired' THEN x.at + interval '20 minutes' WHEN 'pending' THEN CASE WHEN m.r = 3 THEN now() - interval '5 seconds' ELSE x.at END
                          WHEN 'sending' THEN now() - interval '15 seconds' ELSE x.at + interval '250 ms' END AS updated_at
) s;
SQL
}
# Notifications \$lo..\$hi, with their deliveries' id range (deliveries_sql's ids); the third app's
# text is erased when \$erase (its deliveries ended).
notifications_sql() { # lo hi erase
    cat <<SQL
INSERT INTO notifications (id, app_id, ticket_id, title, body, request_id, content, received_at, first_delivery_id, last_delivery_id)
SELECT pg_temp.day_id(pg_temp.at(n), n), (ARRAY['acme', 'globex', 'initech'])[pg_temp.ticket(n) % 3 + 1], pg_temp.ticket_id(n),
    CASE WHEN $3 AND pg_temp.ticket(n) % 3 = 2 THEN NULL ELSE (ARRAY['Ana', 'Bruno', 'Chen', 'Dara', 'Emeka', 'Fatima'])[n % 6 + 1] || ' replied' END,
    CASE WHEN $3 AND pg_temp.ticket(n) % 3 = 2 THEN NULL
         ELSE substr('Thanks for getting back to us. I have checked your order and the refund was issued today; it should reach your account within five business days. Is there anything else I can help you with?', 1 + (n % 40)::int, 40 + (n * 37 % 140)::int) END,
    md5(n::text)::uuid::text, CASE WHEN pg_temp.ticket(n) % 3 = 2 THEN 'encrypted' ELSE 'full' END, pg_temp.at(n),
    pg_temp.day_id(pg_temp.at(n), n * 4), pg_temp.day_id(pg_temp.at(n), n * 4 + ((pg_temp.ticket(n) / 3) % 150) % 3)
FROM generate_series($1::bigint, $2::bigint) n;
SQL
}

# Jobs \$lo..\$hi of 40: one bulk unregister every 3 days, the 40th queued with its upload.
jobs_sql() { # lo hi
    cat <<SQL
INSERT INTO jobs (id, app_id, kind, status, parameters, total, processed, removed, not_found, failed, error, created_at, started_at,
                  finished_at, propagate_to_zendesk, batch_size)
SELECT md5('job' || j)::uuid, (ARRAY['acme', 'globex', 'initech'])[j % 3 + 1], 'bulk_unregister',
       CASE WHEN j = 40 THEN 'queued' WHEN j % 13 = 0 THEN 'failed' WHEN j % 17 = 0 THEN 'cancelled' ELSE 'succeeded' END,
       jsonb_build_object('propagate_to_zendesk', j % 2 = 0), 20000, CASE WHEN j = 40 THEN 0 ELSE 20000 END,
       CASE WHEN j = 40 THEN 0 ELSE 300 END, CASE WHEN j = 40 THEN 0 ELSE 19700 END, 0,
       CASE WHEN j % 13 = 0 AND j <> 40 THEN 'the job failed: connection lost' END,
       now() - interval '120 days' + j * interval '3 days', CASE WHEN j < 40 THEN now() - interval '120 days' + j * interval '3 days' + interval '2 seconds' END,
       CASE WHEN j < 40 THEN now() - interval '120 days' + j * interval '3 days' + interval '9 seconds' END, j % 2 = 0, CASE WHEN j < 40 THEN 5000 END
FROM generate_series($1, $2) j;
SQL
}

# In both databases: the registry (devices), the jobs and the Zendesk queue (their own retention,
# not the pushes' history), provider tokens.
for db in history empty; do
    psql_db "$db" <<SQL
BEGIN;
$common_sql
INSERT INTO devices (app_id, token, platform, user_id, environment, locale, status, invalid_reason, invalidated_at, created_at, updated_at)
SELECT app_id, token, platform, user_id, CASE WHEN platform = 'ios' THEN 'production' END, 'en-US',
       CASE WHEN slot % 97 = 5 THEN 'invalid' ELSE 'active' END, CASE WHEN slot % 97 = 5 THEN 'APNs 410 Unregistered' END,
       CASE WHEN slot % 97 = 5 THEN now() - interval '3 days' END, now() - interval '200 days' + slot * interval '1 hour', now() - interval '30 days'
FROM devs;
$(jobs_sql 1 40)
UPDATE jobs SET created_at = now() - interval '1 minute' WHERE status = 'queued';
INSERT INTO job_tokens (job_id, line, token) SELECT md5('job40')::uuid, i, md5('upload' || i) || md5('more' || i) FROM generate_series(1, 20000) i;
-- The Zendesk queue holds what the jobs removed (forwarded) and the dead tokens of invalid devices.
INSERT INTO zendesk_unregister_queue (app_id, token, platform, reason, job_id, attempts, next_attempt_at, queued_at, forwarded_at)
SELECT j.app_id, 'bulk-' || j.n || '-' || md5(i::text), 'ios', 'bulk_unregister', j.id, 1, j.finished_at, j.finished_at, j.finished_at + interval '1 minute'
FROM (SELECT row_number() OVER (ORDER BY created_at) AS n, * FROM jobs WHERE propagate_to_zendesk AND status = 'succeeded') j, generate_series(1, 300) i;
INSERT INTO zendesk_unregister_queue (app_id, token, platform, reason, attempts, next_attempt_at, queued_at, forwarded_at)
SELECT app_id, token, platform, invalid_reason, 1, invalidated_at, invalidated_at, invalidated_at + interval '2 seconds'
FROM devices WHERE status = 'invalid';
INSERT INTO provider_tokens VALUES ('apns:TEAM123456:KEY1234567', 'eyJhbGciOiJFUzI1NiJ9.e30.sig', now() - interval '20 minutes', now() + interval '40 minutes'),
    ('fcm:relay@acme-mobile.iam.gserviceaccount.com', 'ya29.token', now() - interval '10 minutes', now() + interval '50 minutes');
INSERT INTO credential_rejections VALUES ('initech', 'android', now() - interval '2 days', 'FCM 401 UNAUTHENTICATED');
COMMIT;
SQL
done

# In `history` only: the history, 120 days of pushes.
psql_db history <<SQL
BEGIN;  -- one now() for every row
SET LOCAL work_mem = '256MB';
$common_sql
-- History: 120 days up to now.
CREATE FUNCTION pg_temp.at(n bigint) RETURNS timestamptz STABLE LANGUAGE sql
    AS 'SELECT now() - interval ''120 days'' + interval ''120 days'' * ((n - 1)::float8 / $history_notifications)';
$(notifications_sql 1 "$history_notifications" true)
$(deliveries_sql 1 "$history_notifications" "$((history_notifications + 1))")
COMMIT;
SQL
echo "  history seeded in $((SECONDS - seed_start)) s; VACUUM ANALYZE ..."
vacuum_start=$SECONDS
for db in history empty; do psql_db "$db" -c "VACUUM ANALYZE"; done
echo "  VACUUM ANALYZE: $((SECONDS - vacuum_start)) s"

# In both databases: the last 5 minutes as a relay leaves them, inserted now (so their times are
# recent): the live set that `empty` shares with `history`.
for db in history empty; do
    psql_db "$db" <<SQL
BEGIN;
SET LOCAL work_mem = '256MB';
$common_sql
-- The tail's tickets have 8 replies each too (over its 5 minutes), so a ticket's page holds as many
-- rows in both databases; its devices and users stay those of pg_temp.ticket, all of them. Numbered
-- apart from the history's tickets; tail / 24 tickets per app, at least 20 (20,000 deliveries or more).
CREATE OR REPLACE FUNCTION pg_temp.ticket_id(n bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS 'SELECT (49000000 + (pg_temp.ticket(n) % 3) * 100000 + (n - $history_notifications - 1) % $((tail / 24)))::text';
CREATE FUNCTION pg_temp.at(n bigint) RETURNS timestamptz STABLE LANGUAGE sql
    AS 'SELECT now() - interval ''5 minutes'' + interval ''5 minutes'' * ((n - $history_notifications)::float8 / $tail)';
$(notifications_sql "$((history_notifications + 1))" "$notifications" false)
$(deliveries_sql "$((history_notifications + 1))" "$notifications" "$((history_notifications + 1))")
-- The sweep has passed every not-due delivery whose lease ended a second ago.
UPDATE delivery_sweep SET (swept_to, swept_id) = (
    SELECT next_attempt_at, id FROM deliveries WHERE NOT due AND next_attempt_at < now() - interval '1 second'
    ORDER BY next_attempt_at DESC, id DESC LIMIT 1);
-- Unread replies of the tail's owners (their users), ids of the newest 32.
INSERT INTO unread_counters (app_id, owner, ticket_id, unread, notification_ids, updated_at)
SELECT n.app_id, d.user_id, n.ticket_id, count(*), (array_agg(n.id ORDER BY n.id DESC))[1:32], max(n.received_at)
FROM notifications n JOIN devs d ON d.slot = (pg_temp.ticket(n.id & 4294967295) % 3) * 450 + ((pg_temp.ticket(n.id & 4294967295) / 3) % 150) * 3 + 1
WHERE n.id IN (SELECT id FROM notifications ORDER BY id DESC LIMIT $tail) GROUP BY 1, 2, 3;
-- A receiver down for 10 minutes: globex's events wait.
INSERT INTO delivery_events (app_id, type, delivery_id, notification_id, ticket_id, platform, token_hint, reason, at)
SELECT d.app_id, CASE d.status WHEN 'delivered' THEN 'delivered' ELSE d.status END, d.id, d.notification_id, n.ticket_id, d.platform,
       left(d.device_token, 6) || '…' || right(d.device_token, 4), d.last_error, d.updated_at
FROM deliveries d JOIN notifications n ON n.id = d.notification_id
WHERE n.id > pg_temp.day_id(pg_temp.at($history_notifications), $history_notifications)
  AND d.app_id = 'globex' AND d.status NOT IN ('pending', 'sending') ORDER BY d.id;
INSERT INTO activity_minutes (app_id, minute, webhooks, delivered, failed, expired, dead_token, skipped)
SELECT app, date_trunc('minute', now()) - m * interval '1 minute', 40 + m % 7, 78 + m % 11, 2, 0, 1, 1
FROM unnest(ARRAY['acme', 'globex', 'initech']) app, generate_series(0, 119) m;
-- Two instances' reports of what they have in flight (ActivityWriter).
INSERT INTO instance_queue (instance, app_id, in_flight)
SELECT 'relay-' || r || '.internal:4711:delivery', app, 40 * r FROM unnest(ARRAY['acme', 'globex', 'initech']) app, generate_series(1, 2) r;
INSERT INTO leases VALUES ('retention', 'relay-1.internal:4711:retention', now() + interval '40 minutes'),
    ('events:globex', 'relay-2.internal:4711:events', now() + interval '50 seconds');
-- The id sequences where intake left them: past the newest row.
SELECT setval('notifications_id_seq', (SELECT max(id) FROM notifications)), setval('deliveries_id_seq', (SELECT max(id) FROM deliveries)) \\g /dev/null
COMMIT;
ANALYZE delivery_sweep, unread_counters, delivery_events, activity_minutes, instance_queue, leases;
SQL
done
echo "  seeded in $((SECONDS - seed_start)) s: $(psql_db history -At -F ' ' -c "SELECT (SELECT count(*) FROM deliveries) || ' deliveries (' ||
    (SELECT string_agg(status || ' ' || c, ', ' ORDER BY c DESC) FROM (SELECT status, count(*) c FROM deliveries GROUP BY 1) s) || '), ' ||
    (SELECT count(*) FROM notifications) || ' notifications, ' || (SELECT count(*) FROM devices) || ' devices, ' || (SELECT count(*) FROM jobs) || ' jobs'")"
psql_db history -q -c "ALTER SYSTEM SET max_wal_size = '1GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '5min'" -c "SELECT pg_reload_conf()" >/dev/null

# --- The queries -----------------------------------------------------------------------------------
# name -> label, source (file:line where the SQL starts), a fragment that must still be in that
# file, the SQL (Swift interpolations expanded), and the sampled parameters' SQL (in `history`,
# one row of EXECUTE arguments per run; i is the run).
declare -A label source fragment sql params
names=()
# The SQL of DeliveryPartitions.ofNotification(), which the copies below name as the source does.
of_notification='d.notification_id = n.id AND d.id BETWEEN coalesce(n.first_delivery_id, ((n.id >> 32) - 100) << 32) AND coalesce(n.last_delivery_id, ((n.id >> 32) + 101) << 32)'
expand() { local text; text="$(cat)"; echo "${text//"\\(DeliveryPartitions.ofNotification())"/$of_notification}"; }
query() { # name label source fragment; SQL on stdin
    names+=("$1")
    label[$1]="$2" source[$1]="$3" fragment[$1]="$4"
    sql[$1]="$(expand)"
}
# Random existing rows, one per run: notifications of a day @DAY@ (in `history` any of the 118 full
# days before today, in `empty` today's tail), a random place in the day's id range. (The random
# numbers are drawn first: a volatile expression cannot be an index condition.)
random_notification="SELECT g.i, n.* FROM (
        SELECT i, push_relay_history_bound(@DAY@) AS lo, random() AS u
        FROM generate_series(1, $runs) i OFFSET 0) g
    CROSS JOIN LATERAL (SELECT min(id) AS first, max(id) AS last FROM notifications WHERE id >= g.lo AND id < g.lo + 4294967296) r
    CROSS JOIN LATERAL (SELECT id, app_id, ticket_id, first_delivery_id, last_delivery_id FROM notifications
                        WHERE id >= r.first + floor(g.u * (r.last - r.first))::bigint
                        ORDER BY id LIMIT 1) n"
random_device="SELECT g.i, d.* FROM (SELECT i, floor(random() * (SELECT count(*) FROM devices))::int AS r FROM generate_series(1, $runs) i OFFSET 0) g
    CROSS JOIN LATERAL (SELECT app_id, token, user_id FROM devices ORDER BY app_id, token OFFSET g.r LIMIT 1) d"

# shellcheck disable=SC2016  # the fragments are SQL, with its $1, $2
{
query status_notification "status: notification by id" Sources/PushRelay/Status/DeliveryStatusStore.swift:198 \
    'FROM notifications n WHERE n.id = $1 AND n.app_id = $2' <<'SQL'
SELECT n.id, n.ticket_id, n.title, n.received_at, n.content, n.first_delivery_id, n.last_delivery_id
FROM notifications n WHERE n.id = $1 AND n.app_id = $2
SQL
params[status_notification]="SELECT i, format('%s, %L', id, app_id) FROM ($random_notification) r"

query status_notification_deliveries "status: a notification's deliveries, counts" Sources/PushRelay/Status/DeliveryStatusStore.swift:208 \
    'FROM deliveries d CROSS JOIN (SELECT $5::text AS ticket_id) n' <<'SQL'
SELECT d.id, d.notification_id, n.ticket_id, d.device_token, d.platform, d.kind, d.status, d.attempts, d.last_error, d.provider_id, d.created_at, d.updated_at, d.delivered_at, count(*) FILTER (WHERE d.status = 'pending') OVER ()::int AS pending, count(*) FILTER (WHERE d.status = 'sending') OVER ()::int AS sending, count(*) FILTER (WHERE d.status = 'delivered') OVER ()::int AS delivered, count(*) FILTER (WHERE d.status = 'failed') OVER ()::int AS failed, count(*) FILTER (WHERE d.status = 'dead_token') OVER ()::int AS dead_token, count(*) FILTER (WHERE d.status = 'expired') OVER ()::int AS expired, count(*) FILTER (WHERE d.status = 'skipped') OVER ()::int AS skipped
FROM deliveries d CROSS JOIN (SELECT $5::text AS ticket_id) n
WHERE d.notification_id = $1 AND d.id BETWEEN coalesce($2::bigint, (($1::bigint >> 32) - 100) << 32) AND coalesce($3::bigint, (($1::bigint >> 32) + 101) << 32)
ORDER BY d.id LIMIT $4
SQL
params[status_notification_deliveries]="SELECT i, format('%s, %s, %s, 1000, %L', id, coalesce(first_delivery_id::text, 'NULL'), coalesce(last_delivery_id::text, 'NULL'), ticket_id)
    FROM ($random_notification) r"

query status_ticket "status: ticket's notifications (51)" Sources/PushRelay/Status/DeliveryStatusStore.swift:240 \
    'SELECT * FROM notifications WHERE app_id = $1 AND ticket_id = $2 AND id < coalesce($3::bigint, 9223372036854775807)' <<'SQL'
SELECT n.id, n.ticket_id, n.title, n.received_at, n.content, c.pending, c.sending, c.delivered, c.failed, c.dead_token, c.expired, c.skipped FROM (
    SELECT * FROM notifications WHERE app_id = $1 AND ticket_id = $2 AND id < coalesce($3::bigint, 9223372036854775807) ORDER BY id DESC LIMIT $4
) n
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE d.status = 'pending')::int AS pending, count(*) FILTER (WHERE d.status = 'sending')::int AS sending, count(*) FILTER (WHERE d.status = 'delivered')::int AS delivered, count(*) FILTER (WHERE d.status = 'failed')::int AS failed, count(*) FILTER (WHERE d.status = 'dead_token')::int AS dead_token, count(*) FILTER (WHERE d.status = 'expired')::int AS expired, count(*) FILTER (WHERE d.status = 'skipped')::int AS skipped
    FROM deliveries d WHERE \(DeliveryPartitions.ofNotification())
) c
ORDER BY n.id DESC
SQL
params[status_ticket]="SELECT i, format('%L, %L, NULL, 51', app_id, ticket_id) FROM ($random_notification) r"

query status_device "status: device's deliveries (51)" Sources/PushRelay/Status/DeliveryStatusStore.swift:271 \
    'WHERE app_id = $1 AND hashtextextended(device_token, 0) = hashtextextended($2, 0) AND device_token = $2' <<'SQL'
SELECT d.id, d.notification_id, n.ticket_id, d.device_token, d.platform, d.kind, d.status, d.attempts, d.last_error, d.provider_id, d.created_at, d.updated_at, d.delivered_at FROM (
    SELECT * FROM deliveries
    WHERE app_id = $1 AND hashtextextended(device_token, 0) = hashtextextended($2, 0) AND device_token = $2
      AND id < coalesce($3::bigint, 9223372036854775807)
    ORDER BY id DESC LIMIT $4
) d
LEFT JOIN notifications n ON n.id = d.notification_id
ORDER BY d.id DESC
SQL
params[status_device]="SELECT i, format('%L, %L, NULL, 51', app_id, token) FROM ($random_device) r"

query overview_activity "overview: activity per minute" Sources/PushRelay/Console/OperatorStore.swift:24 \
    'FROM activity_minutes WHERE app_id = ANY($1) AND minute >= to_timestamp($2)' <<'SQL'
SELECT app_id, extract(epoch FROM minute)::bigint, webhooks, delivered, failed, expired, dead_token, skipped
FROM activity_minutes WHERE app_id = ANY($1) AND minute >= to_timestamp($2)
SQL
params[overview_activity]="SELECT i, format('%L, %s', '{acme,globex,initech}', extract(epoch FROM date_trunc('minute', now()))::bigint - 59 * 60)
    FROM generate_series(1, $runs) i"

query overview_depths "overview: queue depths" Sources/PushRelay/Console/OperatorStore.swift:51 \
    '(SELECT count(*) FROM (SELECT 1 FROM delivery_events e WHERE e.app_id = a.app LIMIT $2) eq)' <<'SQL'
SELECT a.app, q.pending,
    (SELECT least(q.orphaned + coalesce(sum(i.in_flight), 0), $2) FROM instance_queue i
     WHERE i.app_id = a.app AND i.reported_at > now() - interval '15 seconds'),
    q.retrying,
    (SELECT count(*) FROM (SELECT 1 FROM zendesk_unregister_queue z WHERE z.app_id = a.app AND z.forwarded_at IS NULL LIMIT $2) zq),
    (SELECT count(*) FROM (SELECT 1 FROM delivery_events e WHERE e.app_id = a.app LIMIT $2) eq)
FROM unnest($1::text[]) AS a (app)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE d.status = 'pending' AND d.attempts = 0) AS pending,
           count(*) FILTER (WHERE d.status = 'sending' AND d.lease_expires_at < now()) AS orphaned,
           count(*) FILTER (WHERE d.status = 'pending' AND d.attempts > 0) AS retrying
    FROM (
        SELECT status, attempts, lease_expires_at FROM deliveries
        WHERE app_id = a.app AND due AND status IN ('pending', 'sending') LIMIT $2
    ) d
) q
SQL
params[overview_depths]="SELECT i, format('%L, 100000', '{acme,globex,initech}') FROM generate_series(1, $runs) i"

query jobs_list "admin: jobs list (20)" Sources/PushRelay/Admin/JobStore.swift:246 \
    'FROM jobs j WHERE $2::text IS NULL OR j.app_id = $2 ORDER BY j.created_at DESC LIMIT $1' <<'SQL'
SELECT j.id, j.app_id, j.kind, j.status, j.propagate_to_zendesk, j.total, j.processed, j.removed, j.not_found, j.failed,
(SELECT count(*) FROM zendesk_unregister_queue z WHERE z.job_id = j.id AND z.forwarded_at IS NOT NULL)::bigint,
j.error, j.created_at, j.started_at, j.finished_at FROM jobs j WHERE $2::text IS NULL OR j.app_id = $2 ORDER BY j.created_at DESC LIMIT $1
SQL
params[jobs_list]="SELECT i, '20, NULL' FROM generate_series(1, $runs) i"

query job_get "admin: a job" Sources/PushRelay/Admin/JobStore.swift:241 \
    'FROM jobs j WHERE j.id = $1' <<'SQL'
SELECT j.id, j.app_id, j.kind, j.status, j.propagate_to_zendesk, j.total, j.processed, j.removed, j.not_found, j.failed,
(SELECT count(*) FROM zendesk_unregister_queue z WHERE z.job_id = j.id AND z.forwarded_at IS NOT NULL)::bigint,
j.error, j.created_at, j.started_at, j.finished_at FROM jobs j WHERE j.id = $1
SQL
params[job_get]="SELECT i, format('%L', md5('job' || (1 + floor(random() * 40 + i * 0))::int)::uuid) FROM generate_series(1, $runs) i"

query device_get "devices: a device" Sources/PushRelay/Devices/PostgresDeviceRepository.swift:81 \
    'FROM devices WHERE app_id = $1 AND token = $2", [app, token])' <<'SQL'
SELECT app_id, token, platform, user_id, environment, locale, status, invalid_reason, created_at, updated_at, push_key IS NOT NULL, push_key_id FROM devices WHERE app_id = $1 AND token = $2
SQL
params[device_get]="SELECT i, format('%L, %L', app_id, token) FROM ($random_device) r"

query user_devices "devices: a user's devices" Sources/PushRelay/Devices/PostgresDeviceRepository.swift:105 \
    'FROM devices WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, token' <<'SQL'
SELECT app_id, token, platform, user_id, environment, locale, status, invalid_reason, created_at, updated_at, push_key IS NOT NULL, push_key_id FROM devices WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, token
SQL
params[user_devices]="SELECT i, format('%L, %L', app_id, user_id) FROM ($random_device) r"

query unread_summary "unread: an owner's counts" Sources/PushRelay/Unread/UnreadStore.swift:27 \
    'SELECT ticket_id, unread FROM unread_counters WHERE app_id = $1 AND owner = $2 AND unread > 0 ORDER BY ticket_id' <<'SQL'
SELECT ticket_id, unread FROM unread_counters WHERE app_id = $1 AND owner = $2 AND unread > 0 ORDER BY ticket_id
SQL
params[unread_summary]="SELECT i, format('%L, %L', app_id, user_id) FROM ($random_device) r"
}

grep -qF '"coalesce(\(first), ((\(id) >> 32) - \(unrangedDays)) << 32)",' Sources/PushRelay/Outbox/DeliveryPartitions.swift &&
    grep -qF '"coalesce(\(last), ((\(id) >> 32) + \(unrangedDays + 1)) << 32)"' Sources/PushRelay/Outbox/DeliveryPartitions.swift &&
    grep -qF 'return "\(d).id BETWEEN \(ids.first) AND \(ids.last)"' Sources/PushRelay/Outbox/DeliveryPartitions.swift &&
    grep -qF 'static let unrangedDays = 100' Sources/PushRelay/Outbox/DeliveryPartitions.swift &&
    grep -qF 'inRange(d, id: "\(n).id", first: "\(n).first_delivery_id", last: "\(n).last_delivery_id")' Sources/PushRelay/Outbox/DeliveryPartitions.swift ||
    log "warning: DeliveryPartitions.ofNotification or inRange is no longer as copied here; check it"
for name in "${names[@]}"; do
    file="${source[$name]%%:*}"
    grep -qF -- "${fragment[$name]}" "$file" || log "warning: ${label[$name]}: its SQL is no longer in $file as copied here; check it"
done

# Parameters: notifications sampled in each database from its own, those of the 118 days before
# today in `history`, of today's tail in `empty`; every other parameter (devices, users, jobs, the
# same rows in both) sampled once in `history` and used in both.
declare -A sampled_day=([history]="(now() AT TIME ZONE 'UTC')::date - 1 - floor(random() * 118)::int"
    [empty]="(now() AT TIME ZONE 'UTC')::date")
for name in "${names[@]}"; do
    psql_db history -At -F $'\t' -c "SELECT '$name', * FROM (${params[$name]//@DAY@/${sampled_day[history]}}) p" >"$work/params-history-$name.tsv"
    if [[ "${params[$name]}" == *@DAY@* ]]; then
        psql_db empty -At -F $'\t' -c "SELECT '$name', * FROM (${params[$name]//@DAY@/${sampled_day[empty]}}) p"
    else
        cat "$work/params-history-$name.tsv"
    fi >"$work/params-empty-$name.tsv"
done
for db in history empty; do cat "$work"/params-"$db"-*.tsv >"$work/params-$db.tsv"; done

# measure DATABASE NAME RUNS [SETUP]: prints "p50 p99 plan_p50 buffers" (ms; buffers hit+read of
# one more run), and on `history` the EXPLAIN (ANALYZE, BUFFERS) to $work/plans.txt.
measure() {
    local db="$1" name="$2" n="$3" setup="${4:-}"
    {
        echo "BEGIN;"  # rolled back: a setup's change stays in this session
        echo "$setup"
        echo "CREATE TEMP TABLE params (query text, i int, args text);"
        echo "\\copy params FROM '$work/params-$db.tsv'"
        echo "DELETE FROM params WHERE query <> '$name' OR i > $n;"
        echo "CREATE TEMP TABLE timings (i int, exec_ms float8, plan_ms float8);"
        echo "PREPARE $name AS ${sql[$name]};"
        cat <<SQL
DO \$\$
DECLARE r record; p json; started timestamptz := clock_timestamp();
BEGIN
    FOR r IN SELECT i, args FROM params ORDER BY i LOOP
        EXECUTE format('EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON, FORMAT JSON) EXECUTE $name(%s)', r.args) INTO p;
        INSERT INTO timings VALUES (r.i, (p -> 0 ->> 'Execution Time')::float8, (p -> 0 ->> 'Planning Time')::float8);
        EXIT WHEN clock_timestamp() - started > interval '$query_budget_seconds seconds';
    END LOOP;
END
\$\$;
SQL
        if [ "$db" = history ]; then
            echo "SELECT args AS first_args FROM params ORDER BY i LIMIT 1 \\gset"
            echo "\\o '$work/plan.txt'"
            echo "EXPLAIN (ANALYZE, BUFFERS) EXECUTE $name(:first_args);"
            echo "\\o"
        fi
        cat <<SQL
DO \$\$
DECLARE p json;
BEGIN
    PERFORM set_config('bench.buffers', '-', false);
    IF EXISTS (SELECT 1 FROM params) THEN
        EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE $name(%s)', (SELECT args FROM params ORDER BY i LIMIT 1)) INTO p;
        PERFORM set_config('bench.buffers', ((p -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint + (p -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint)::text, false);
    END IF;
END
\$\$;
SQL
        echo "\\o '$work/result.txt'"
        echo "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY exec_ms)::numeric, 3), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY exec_ms)::numeric, 3),
            round(percentile_cont(0.5) WITHIN GROUP (ORDER BY plan_ms)::numeric, 3), current_setting('bench.buffers'), count(*),
            round(percentile_cont(0.5) WITHIN GROUP (ORDER BY plan_ms + exec_ms)::numeric, 3) FROM timings;"
        echo "\\o"
        echo "ROLLBACK;"
    } | psql_db "$db" -At -F ' ' >/dev/null
    # A fifth field: "seq" when the plan reads deliveries or notifications whole.
    if [ "$db" = history ] && grep -qE 'Seq Scan on (deliveries|notifications)' "$work/plan.txt"; then
        echo "$(cat "$work/result.txt") seq"
    else
        echo "$(cat "$work/result.txt") -"
    fi
    if [ "$db" = history ]; then
        { echo "--- ${label[$name]}${setup:+ ($setup)} (${source[$name]}): EXECUTE $name($(awk -F'\t' -v q="$name" '$1 == q {print $3; exit}' "$work/params-history.tsv"))"
          cat "$work/plan.txt"; } >>"$work/plans.txt"
    fi
}

echo
echo "queries: $runs runs each with sampled parameters, empty and seeded interleaved ..."
results=()
round=0
for name in "${names[@]}"; do
    round=$((round + 1))
    declare -A got=()
    for db in $(alternate "$round" empty history); do got[$db]="$(measure "$db" "$name" "$runs")"; done
    results+=("${label[$name]}|${source[$name]}|${got[empty]}|${got[history]}")
done

echo
echo "EXPLAIN (ANALYZE, BUFFERS) on history, one run each (the first sampled parameters):"
sed 's/^/  /' "$work/plans.txt"

# --- Retention -------------------------------------------------------------------------------------
# RetentionService.runOnce (Sources/PushRelay/Retention/Retention.swift): each statement as in its
# source (DeliveryQueue+Retention.swift, HistoryPartitions.swift, Retention.swift,
# ZendeskQueue.swift), bound as the relay binds them, one transaction
# each, a pause after each full batch. The served apps are the three; maxAge 86400 s
# (delivery.max_age_seconds). No row-by-row walk: the seeded history has no `*_unpartitioned` table.
retention_sql=$(cat <<'SQL'
CREATE TEMP TABLE steps (run text, step text, statements int, rows bigint, seconds float8);
-- Batches of one drain until one is short (Retention.swift's drain).
CREATE PROCEDURE pg_temp.drain(run text, step text, statement text, batch int, pause_ms int, days int)
LANGUAGE plpgsql AS $proc$
DECLARE got int; t timestamptz; n int := 0; total bigint := 0; secs float8 := 0;
BEGIN
    LOOP
        t := clock_timestamp();
        CASE step
            WHEN 'unserved deliveries ended' THEN
                EXECUTE statement INTO got USING ARRAY['acme', 'globex', 'initech'], 86400::float8, batch, 'the app was removed from this relay'::text;
            WHEN 'job_tokens', 'notification_texts' THEN EXECUTE statement INTO got USING batch;
            ELSE EXECUTE statement INTO got USING batch, days;
        END CASE;
        COMMIT;
        secs := secs + extract(epoch FROM clock_timestamp() - t); n := n + 1; total := total + got;
        EXIT WHEN got < batch;
        PERFORM pg_sleep(pause_ms / 1000.0);
    END LOOP;
    INSERT INTO steps VALUES (run, step, n, total, secs);
    COMMIT;
END
$proc$;
-- HistoryPartitions.deliveriesExpired and notificationsExpired, their statements as in the source.
CREATE FUNCTION pg_temp.deliveries_expired(part text, upper bigint, delivered int, failed int, margin float8) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE closed boolean; delivered_expired boolean; failed_expired boolean; due boolean; none_failed boolean;
BEGIN
    EXECUTE format($q$
            SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM deliveries_id_seq) >= $1,
                   newest IS NULL OR newest < now() - make_interval(days => $2, secs => $4),
                   newest IS NULL OR newest < now() - make_interval(days => $3, secs => $4),
                   EXISTS (SELECT 1 FROM %1$I WHERE due)
            FROM (SELECT (SELECT created_at FROM %1$I ORDER BY id DESC LIMIT 1) AS newest) t
    $q$, part) INTO closed, delivered_expired, failed_expired, due USING upper, delivered, failed, margin;
    IF NOT closed OR due OR NOT delivered_expired THEN RETURN false; END IF;
    IF failed_expired THEN RETURN true; END IF;
    EXECUTE format($q$SELECT NOT EXISTS (SELECT 1 FROM %I WHERE status IN ('failed', 'expired', 'dead_token'))$q$, part) INTO none_failed;
    RETURN none_failed;
END
$fn$;
CREATE FUNCTION pg_temp.notifications_expired(part text, lower bigint, upper bigint, days int) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE closed boolean; expired boolean; referenced boolean;
BEGIN
    EXECUTE format($q$
            SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM notifications_id_seq) >= $1,
                   coalesce((SELECT received_at FROM %I ORDER BY id DESC LIMIT 1) < now() - make_interval(days => $2), true)
    $q$, part) INTO closed, expired USING upper, days;
    IF NOT ((lower IS NULL OR closed) AND expired) THEN RETURN false; END IF;
    EXECUTE format($q$
            WITH ids AS MATERIALIZED (
                SELECT min(coalesce(first_delivery_id, ((id >> 32) - 100) << 32)) AS first,
                       max(coalesce(last_delivery_id, ((id >> 32) + 101) << 32)) AS last
                FROM %I WHERE last_delivery_id IS DISTINCT FROM 0
            )
            SELECT EXISTS (
                SELECT 1 FROM ids CROSS JOIN LATERAL (
                    SELECT 1 FROM deliveries d WHERE d.id BETWEEN ids.first AND ids.last
                    AND d.notification_id >= coalesce($2, -9223372036854775808) AND d.notification_id < $1 LIMIT 1
                ) found
            )
    $q$, part) INTO referenced USING upper, lower;
    RETURN NOT referenced;
END
$fn$;
SQL
)
unserved_statement=$(cat <<'SQL'
            WITH doomed AS (
                SELECT id FROM deliveries
                WHERE due AND NOT (app_id = ANY($1::text[])) AND next_attempt_at < now() - make_interval(secs => $2)
                ORDER BY app_id, next_attempt_at LIMIT $3
            ),
            ended AS (
                UPDATE deliveries d SET status = 'failed', due = false, last_error = $4, lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = now()
                FROM doomed WHERE d.id = doomed.id AND d.due
                RETURNING 1
            )
            SELECT count(*)::int FROM ended
SQL
)
declare -A drain_statement
drain_steps=(delivery_events job_tokens jobs zendesk_unregister_queue notification_texts)
drain_statement[delivery_events]=$(cat <<'SQL'
            WITH doomed AS (
                DELETE FROM delivery_events WHERE id IN (
                    SELECT id FROM delivery_events WHERE at < now() - make_interval(days => $2) ORDER BY id LIMIT $1
                )
                RETURNING 1
            )
            SELECT count(*)::int FROM doomed
SQL
)
drain_statement[job_tokens]=$(cat <<'SQL'
            WITH finished AS MATERIALIZED (
                SELECT id FROM jobs WHERE status IN ('succeeded', 'failed', 'cancelled')
            ),
            tokens AS (
                DELETE FROM job_tokens WHERE ctid IN (
                    SELECT t.ctid FROM finished f JOIN job_tokens t ON t.job_id = f.id LIMIT $1
                )
                RETURNING 1
            ),
            batches AS (
                DELETE FROM job_batches b USING finished f WHERE b.job_id = f.id
            )
            SELECT count(*)::int FROM tokens
SQL
)
drain_statement[jobs]=$(cat <<'SQL'
            WITH doomed AS (
                DELETE FROM jobs WHERE id IN (
                    SELECT id FROM jobs
                    WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at < now() - make_interval(days => $2)
                    ORDER BY finished_at LIMIT $1
                )
                RETURNING id
            ),
            tokens AS (
                DELETE FROM job_tokens t USING doomed d WHERE t.job_id = d.id
            ),
            batches AS (
                DELETE FROM job_batches b USING doomed d WHERE b.job_id = d.id
            )
            SELECT count(*)::int FROM doomed
SQL
)
drain_statement[zendesk_unregister_queue]=$(cat <<'SQL'
            WITH doomed AS (
                DELETE FROM zendesk_unregister_queue WHERE (app_id, token) IN (
                    SELECT app_id, token FROM zendesk_unregister_queue
                    WHERE forwarded_at < now() - make_interval(days => $2) ORDER BY forwarded_at LIMIT $1
                )
                RETURNING 1
            )
            SELECT count(*)::int FROM doomed
SQL
)
drain_statement[notification_texts]=$(cat <<'SQL'
            WITH ended AS (
                SELECT n.id FROM notifications n
                WHERE n.content = 'encrypted' AND n.title IS NOT NULL
                AND NOT EXISTS (
                    SELECT 1 FROM deliveries d WHERE \(DeliveryPartitions.ofNotification()) AND d.status IN ('pending', 'sending') OFFSET 0
                )
                ORDER BY n.id LIMIT $1
            ),
            erased AS (UPDATE notifications n SET title = NULL, body = NULL FROM ended WHERE n.id = ended.id RETURNING 1)
            SELECT count(*)::int FROM erased
SQL
)
for name in unserved "${drain_steps[@]}"; do
    statement="${drain_statement[$name]:-$unserved_statement}"
    # Its longest line, which names what the step does, must still be in the source.
    grep -qF -- "$(awk '{ sub(/^ +/, "") } length > max { max = length; line = $0 } END { print line }' <<<"$statement")" \
        Sources/PushRelay/Outbox/*.swift Sources/PushRelay/Retention/*.swift ||
        log "warning: retention step $name: its SQL is no longer in the source as copied here; check it"
done

sizes() { psql_db history -At -F ' ' -c "SELECT regexp_replace(c.relname, '_([0-9]{8}|unpartitioned)$', ''), sum(pg_total_relation_size(c.oid))
    FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace GROUP BY 1 ORDER BY 2 DESC, 1"; }
sizes >"$work/sizes.txt"
rows_before="$(psql_db history -At -c "SELECT count(*) FROM deliveries")"

echo
echo "retention: RetentionService.runOnce with batch $retention_batch, pause $retention_pause_ms ms ..."
retention_lines=()
# mark NAME: in the psql session, its clock, WAL position and the server process's CPU ticks.
mark() { echo "SELECT clock_timestamp() AS t_$1, pg_current_wal_insert_lsn() AS l_$1 \\gset"
         echo "\\! awk '{print \"$1\", \$14 + \$15}' /proc/\$BACKEND/stat >>$work/ticks"; }
retention_run() { # label days
    local days="$2" out counts_before counts_after
    counts_before="$(psql_db history -At -F ' ' -c "SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM notifications)")"
    : >"$work/ticks"
    out="$({
        echo "$retention_sql"
        echo "CHECKPOINT;"
        echo "SELECT pg_backend_pid() AS backend \\gset"
        echo "\\setenv BACKEND :backend"
        mark start
        echo "CALL pg_temp.drain('run', 'unserved deliveries ended', \$step\$$unserved_statement\$step\$, $retention_batch, $retention_pause_ms, $days);"
        mark drops
        # HistoryPartitions.drop of each expired partition, oldest first: deliveries, then notifications.
        echo "SELECT format('ALTER TABLE deliveries DETACH PARTITION %I CONCURRENTLY', partition), format('DROP TABLE IF EXISTS %I', partition)
              FROM history_partitions WHERE parent = 'deliveries' AND pg_temp.deliveries_expired(partition, upper, $days, $days, 86400)
              ORDER BY lower NULLS FIRST \\gexec"
        echo "SELECT format('ALTER TABLE notifications DETACH PARTITION %I CONCURRENTLY', partition), format('DROP TABLE IF EXISTS %I', partition)
              FROM history_partitions WHERE parent = 'notifications' AND pg_temp.notifications_expired(partition, lower, upper, $days)
              ORDER BY lower NULLS FIRST \\gexec"
        mark drains
        for name in "${drain_steps[@]}"; do
            echo "CALL pg_temp.drain('run', '$name', \$step\$$(expand <<<"${drain_statement[$name]}")\$step\$, $retention_batch, $retention_pause_ms, $days);"
        done
        mark end
        echo "SELECT '  ' || step || ': ' || rows || ' rows, ' || statements || ' statements, ' || round(seconds::numeric, 2) || ' s in statements' FROM steps ORDER BY ctid;"
        echo "SELECT 'wall', round(extract(epoch FROM :'t_drains'::timestamptz - :'t_drops')::numeric, 2),
                     round(extract(epoch FROM :'t_end'::timestamptz - :'t_start')::numeric, 1),
                     pg_wal_lsn_diff(:'l_drains', :'l_drops')::bigint, pg_wal_lsn_diff(:'l_end', :'l_start')::bigint;"
    } | psql_db history -At -F ' ')"
    counts_after="$(psql_db history -At -F ' ' -c "SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM notifications)")"
    local drop_wall run_wall drop_wal run_wal drop_cpu run_cpu d0 n0 d1 n1
    read -r _ drop_wall run_wall drop_wal run_wal <<<"$(grep '^wall ' <<<"$out")"
    read -r drop_cpu run_cpu <<<"$(awk -v hz="$(getconf CLK_TCK)" '{ t[$1] = $2 }
        END { printf "%.2f %.2f", (t["drains"] - t["drops"]) / hz, (t["end"] - t["start"]) / hz }' "$work/ticks")"
    read -r d0 n0 <<<"$counts_before"
    read -r d1 n1 <<<"$counts_after"
    echo "$1 (days = $days):"
    grep -v '^wall ' <<<"$out"
    echo "  partitions: $((d0 - d1)) deliveries and $((n0 - n1)) notifications dropped in $drop_wall s wall, $drop_cpu s of server CPU, $drop_wal bytes of WAL"
    echo "  whole run: $run_wall s wall (pauses included), $run_cpu s of server CPU, $run_wal bytes of WAL"
    retention_lines+=("$(printf '%-34s %12s %11s %9s %9s %12s %9s %9s %12s' "$1" "$((d0 - d1))" "$((n0 - n1))" \
        "$drop_wall" "$drop_cpu" "$drop_wal" "$run_wall" "$run_cpu" "$run_wal")")
}
partitions_before="$(psql_db history -At -c "SELECT string_agg(partition, ' ' ORDER BY lower) FROM history_partitions WHERE parent = 'deliveries'")"
retention_run "(a) the oldest partition (a day)" 118
retention_run "(b) four more weeks" 88
partitions_after="$(psql_db history -At -c "SELECT string_agg(partition, ' ' ORDER BY lower) FROM history_partitions WHERE parent = 'deliveries'")"
echo "deliveries partitions dropped: $(comm -23 <(tr ' ' '\n' <<<"$partitions_before" | sort) <(tr ' ' '\n' <<<"$partitions_after" | sort) | tr '\n' ' ')"

# --- The summary -----------------------------------------------------------------------------------
echo
echo "=== summary: $deliveries deliveries requested, $rows_before seeded; $runs runs per query; shared_buffers in $pages;" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')"
echo "empty: the same partitions, registry and live set without the history. Execution time (EXPLAIN ANALYZE, TIMING OFF) in ms;"
echo "ratio = seeded p50 / empty p50; buffers e/s = shared hit + read of one run on the empty / seeded database (seq: the seeded"
echo "plan reads deliveries or notifications sequentially); plan e / plan s = p50 planning time (ms; a custom plan per execution,"
echo "as the relay's) on the empty / seeded database; +plan = the ratio of p50 planning and execution, what the relay waits for;"
echo "(s/e runs): runs cut by the ${query_budget_seconds} s budget"
printf '%-52s %9s %9s %9s %9s %7s %12s %7s %7s %7s  %s\n' query "empty p50" "empty p99" "seed p50" "seed p99" ratio "buffers e/s" "plan e" "plan s" \
    "+plan" source
ratio_of() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", (e > 0 ? s / e : 0) }'; }  # seeded empty
for line in "${results[@]}"; do
    IFS='|' read -r q src empty seeded <<<"$line"
    read -r e50 e99 eplan ebuffers eruns etotal _ <<<"$empty"
    read -r s50 s99 splan sbuffers sruns stotal scan <<<"$seeded"
    ratio="$(ratio_of "$s50" "$e50")"
    with_plan="$(ratio_of "$stotal" "$etotal")"
    buffers="$ebuffers/$sbuffers"
    [ "$scan" != seq ] || buffers="$buffers seq"
    [ "$sruns" = "$eruns" ] || q="$q ($sruns/$eruns runs)"
    printf '%-52s %9s %9s %9s %9s %7s %12s %7s %7s %7s  %s\n' "$q" "$e50" "$e99" "$s50" "$s99" "$ratio" "$buffers" "$eplan" "$splan" \
        "$with_plan" "$src"
done
echo
echo "retention (one run each, in order): rows dropped; the partition drops' wall s, server CPU s and WAL bytes; the whole run's"
printf '%-34s %12s %11s %9s %9s %12s %9s %9s %12s\n' run "deliveries" "notific." "drop s" "drop CPU" "drop WAL" "run s" "run CPU" "run WAL"
printf '%s\n' "${retention_lines[@]}"
echo
echo "size per table before retention (pg_total_relation_size, bytes):"
awk '{ printf "  %-28s %15s\n", $1, $2 }' "$work/sizes.txt"
awk -v rows="$rows_before" '
    $1 == "deliveries" { d = $2 } $1 == "notifications" { n = $2 } { total += $2 }
    END { printf "bytes per delivery row: deliveries %.0f; with notifications %.0f; whole database %.0f\n", d / rows, (d + n) / rows, total / rows }' "$work/sizes.txt"
