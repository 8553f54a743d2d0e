#!/usr/bin/env bash
# Bulk-unregister benchmark: builds release binaries, starts a relay on a fresh embedded (durable)
# PostgreSQL with one app, registers N devices (default 1,000,000) directly in the database, writes
# the same tokens to a file and times `push-relay devices bulk-unregister` from the start of the
# upload until the job reports `succeeded`.
# Usage: Deploy/bench-bulk-unregister.sh [count]
set -euo pipefail
cd "$(dirname "$0")/.."

count="${1:-1000000}"
port="${BENCH_PORT:-18481}"

Deploy/bootstrap.sh
swift build -c release --product push-relay >&2

. Deploy/bench-relay.sh

admin_key="$(.build/release/push-relay keys create --admin --label bench --config "$work/config.yaml" --data-dir "$work/data" 2>/dev/null | tail -n 1)"

# Set-up, not measured: N registered iOS devices and a file of their tokens.
pg_port="$(grep -o 'port = [0-9]*' "$work/data/postgres/pgdata/push-relay.conf" | awk '{print $3}')"
export PGPASSWORD="$(cat "$work/data/postgres/password")"
psql -q -h 127.0.0.1 -p "$pg_port" -U pushrelay pushrelay -c \
    "INSERT INTO devices (app_id, token, platform) SELECT 'bench', lpad(to_hex(i), 64, '0'), 'ios' FROM generate_series(1, $count) i" \
    -c "VACUUM ANALYZE devices"
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(1, int(sys.argv[2]) + 1):
        f.write('%064x\n' % i)
" "$work/tokens.txt" "$count"

echo "machine: $(nproc) cores; $count registered devices; tokens file $(du -h "$work/tokens.txt" | cut -f1)"
PUSH_RELAY_ADMIN_KEY="$admin_key" .build/release/push-relay devices bulk-unregister --app bench --file "$work/tokens.txt" \
    --server "http://127.0.0.1:$port"
echo "devices left: $(psql -qtA -h 127.0.0.1 -p "$pg_port" -U pushrelay pushrelay -c "SELECT count(*) FROM devices WHERE app_id = 'bench'")"
