#!/usr/bin/env bash
# Bulk-unregister benchmark: builds release binaries, starts a relay on a fresh embedded (durable)
# PostgreSQL with one app, registers N devices (default 1,000,000) directly in the database, writes
# the same tokens to a file and times `push-relay devices bulk-unregister` from the start of the
# upload until the job reports `succeeded`.
# Usage: scripts/bench/bulk-unregister.sh [count (1000000)]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

count="${1:-1000000}"
port="${BENCH_PORT:-18481}"

scripts/bootstrap.sh
build_products push-relay
bench_relay
admin_key="$(create_key --admin --label bench --config "$work/config.yaml" --data-dir "$work/data")"

# Set-up, not measured: N registered iOS devices and a file of their tokens.
sql -c "INSERT INTO devices (app_id, token, platform) SELECT 'bench', lpad(to_hex(i), 64, '0'), 'ios' FROM generate_series(1, $count) i" \
    -c "VACUUM ANALYZE devices"
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(1, int(sys.argv[2]) + 1):
        f.write('%064x\n' % i)
" "$work/tokens.txt" "$count"

machine_line
echo "$count registered devices; tokens file $(du -h "$work/tokens.txt" | cut -f1)"
PUSH_RELAY_ADMIN_KEY="$admin_key" "$bin/push-relay" devices bulk-unregister --app bench --file "$work/tokens.txt" \
    --server "http://127.0.0.1:$port"
echo "devices left: $(sql -At -c "SELECT count(*) FROM devices WHERE app_id = 'bench'")"
