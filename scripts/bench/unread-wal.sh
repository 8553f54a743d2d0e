#!/usr/bin/env bash
# Unread WAL benchmark: WAL written per webhook when the reply's owner already has many unread
# replies on its ticket. Each webhook's intake rewrites the owner's `unread_counters` row, so a row
# that grew with every unread reply would make every webhook cost more; migration 0016 keeps it at
# the newest 32 ids.
#
# Starts a relay (intake only, one app) on a fresh embedded durable PostgreSQL. For each size S in
# SIZES and each round (sizes alternating in order by round): WEBHOOKS owners are given S unread
# replies on ticket 1 directly in SQL (ids 1..S, as intake kept them before 0016), a CHECKPOINT
# taken before that so the measured updates write no full-page images; one webhook per owner
# brings each row to the form the relay under test keeps (not measured); then one more webhook per
# owner is sent (one keep-alive connection, one at a time) and the WAL written meanwhile
# (pg_current_wal_lsn) is divided by WEBHOOKS. Prints bytes per webhook per size and round, and
# per round the ratio of each size to the first. WAL does not depend on the build, so
# PUSH_RELAY_BUILD=debug gives the same figures faster.
#
# Usage: scripts/bench/unread-wal.sh [webhooks (1000)] [rounds (3)] [sizes ("10 5000")]
#   RELAY_BINARY=path: that build, not a new one.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

webhooks="${1:-1000}"
rounds="${2:-3}"
read -r -a sizes <<<"${3:-10 5000}"
[[ "$webhooks" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ && ${#sizes[@]} -ge 1 ]] || usage
port="${BENCH_PORT:-18550}"

scripts/bootstrap.sh
[ -n "${RELAY_BINARY:-}" ] || build_products push-relay
bench_relay
# No timed checkpoint (full-page images) and no autovacuum of the counters within a measurement.
sql -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
sql -c "ALTER TABLE unread_counters SET (autovacuum_enabled = false)" >/dev/null
machine_line
echo "WAL per webhook to an owner with S unread replies on its ticket; $webhooks webhooks per figure"

send() { # prefix: one webhook to each of the devices PREFIX-1 … PREFIX-$webhooks
    python3 - "$port" "$secret" "$1" "$webhooks" <<'PY'
import http.client, json, sys
port, secret, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
connection = http.client.HTTPConnection("127.0.0.1", int(port))
for index in range(1, count + 1):
    body = json.dumps({"devices": [{"identifier": f"{prefix}-{index}", "type": "android"}],
                       "notification": {"title": "Agent replied", "body": "A reply", "ticket_id": "1"}})
    connection.request("POST", f"/v1/webhooks/zendesk/bench/{secret}", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 202:
        sys.exit(f"webhook answered {answer.status}")
PY
}

declare -A wal
for round in $(seq 1 "$rounds"); do
    for size in $(alternate "$round" "${sizes[@]}"); do
        prefix="wal-$size-$round"
        sql -c "CHECKPOINT" >/dev/null
        sql >/dev/null <<SQL
INSERT INTO unread_counters (app_id, owner, ticket_id, unread, notification_ids)
SELECT 'bench', '$prefix-' || g, '1', $size, ARRAY(SELECT generate_series(1, $size))::bigint[]
FROM generate_series(1, $webhooks) g;
SQL
        send "$prefix"  # each row as the relay keeps it after a webhook; not measured
        before="$(sql -At -c "SELECT pg_current_wal_lsn()")"
        send "$prefix"
        bytes="$(sql -At -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$before')::bigint / $webhooks")"
        wal[$round,$size]="$bytes"
        echo "round $round: $size unread: $bytes bytes of WAL per webhook"
    done
    line="round $round:"
    for size in "${sizes[@]}"; do
        line="$line $size/${sizes[0]} $(python3 -c "print(f'{${wal[$round,$size]} / ${wal[$round,${sizes[0]}]}:.2f}')")"
    done
    echo "$line"
done
