#!/usr/bin/env bash
# Propagation benchmark: how soon a change made on one instance takes effect on another. Two relay
# processes (release build) share one PostgreSQL (the first one's embedded durable cluster):
# - key revocation: `push-relay keys revoke` returns, then instance B is asked with the key until
#   it answers 401 (each instance trusts its copy of the keys for a second);
# - managed-app pickup: instance A's admin API answers 201 for a new app, then instance B is sent
#   that app's webhook until it answers 202 (B hears of it by NOTIFY).
# Each is timed `rounds` times, asking every few milliseconds with curl (a request costs a few
# milliseconds, which the figures include); prints the median and the largest.
# Usage: scripts/bench/propagation.sh [rounds (20)]; RELAY_BINARY=path: that build, not a new one.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

rounds="${1:-20}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || usage
port="${BENCH_PORT:-18530}"
port_b=$((port + 1))

scripts/bootstrap.sh
[ -n "${RELAY_BINARY:-}" ] || build_products push-relay
work_dir propagation
# The managed apps' key: 32 random bytes, base64.
head -c 32 /dev/urandom | base64 >"$work/apps-store.key"
chmod 600 "$work/apps-store.key"
bench_yaml="apps_store:
  key_file: $work/apps-store.key"
bench_relay_config
relay_start --config "$work/config.yaml" --data-dir "$work/data"

# Instance B: the same configuration on A's cluster.
settings="$(find "$work/data" -name push-relay.conf | head -n 1)"
pg_port="$(sed -n 's/^port = //p' "$settings")"
password="$(cat "$(dirname "$(dirname "$settings")")/password")"
{
    sed "s/^  port: $port\$/  port: $port_b/" "$work/config.yaml"
    printf 'database:\n  url: "postgresql://pushrelay:%s@127.0.0.1:%s/pushrelay"\n' "$password" "$pg_port"
} >"$work/config-b.yaml"
"$relay_binary" serve --config "$work/config-b.yaml" >>"$work/relay-b.out" 2>>"$work/relay-b.log" &
relay_b_pid=$!
trap 'kill -TERM "$relay_b_pid" 2>/dev/null || true; wait "$relay_b_pid" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port_b/ready" >/dev/null && break
    kill -0 "$relay_b_pid" 2>/dev/null || { cat "$work/relay-b.log" >&2; exit 1; }
    sleep 0.25
done

now_ms() { date +%s%3N; }
# Asks `curl ARGS` until it answers `status`; prints the milliseconds since `start` (give up: 60 s).
until_status() {
    local status="$1" start="$2" answer
    shift 2
    while :; do
        answer="$(curl -s -o /dev/null -w '%{http_code}' "$@")"
        [ "$answer" = "$status" ] && break
        if (($(now_ms) - start > 60000)); then
            log "no $status within 60 s (last answer $answer): $*"
            exit 1
        fi
        sleep 0.003
    done
    echo $(($(now_ms) - start))
}
# "median M ms, largest L ms" of the numbers on stdin.
summary() { sort -n | awk '{ v[NR] = $1 } END { printf "median %d ms, largest %d ms (%d rounds)\n", v[int((NR + 1) / 2)], v[NR], NR }'; }

keys_config=(--config "$work/config.yaml" --data-dir "$work/data")
admin_key="$(create_key --admin --label bench "${keys_config[@]}")"
device="$(random_hex 32)"

machine_line
revocations=()
for _ in $(seq 1 "$rounds"); do
    key="$(create_key --app bench --scope devices:read --label bench "${keys_config[@]}")"
    ask_b=(-H "Authorization: Bearer $key" "http://127.0.0.1:$port_b/v1/apps/bench/devices/$device")
    # B knows the key (an unknown device: 404).
    until_status 404 "$(now_ms)" "${ask_b[@]}" >/dev/null
    prefix="${key#prk_}"
    "$relay_binary" keys revoke "${prefix%%_*}" "${keys_config[@]}" >/dev/null 2>>"$work/keys.log" || { cat "$work/keys.log" >&2; exit 1; }
    revocations+=("$(until_status 401 "$(now_ms)" "${ask_b[@]}")")
done
echo "key revoked with keys revoke, refused by the other instance after: $(printf '%s\n' "${revocations[@]}" | summary)"

pickups=()
for round in $(seq 1 "$rounds"); do
    app="managed-$round"
    app_secret="secret-$(random_hex 16)"
    created="$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $admin_key" -H 'Content-Type: application/json' \
        -d "{\"webhook_secrets\":[\"$app_secret\"]}" "http://127.0.0.1:$port/v1/admin/apps/$app")"
    start="$(now_ms)"
    [ "$created" = 201 ] || { log "creating $app on instance A answered $created"; exit 1; }
    pickups+=("$(until_status 202 "$start" -X POST -H 'Content-Type: application/json' \
        -d "{\"devices\":[{\"identifier\":\"$device\",\"type\":\"ios\"}],\"notification\":{\"title\":\"t\",\"body\":\"b\",\"ticket_id\":\"1\"}}" \
        "http://127.0.0.1:$port_b/v1/webhooks/zendesk/$app/$app_secret")")
done
echo "managed app created on one instance, served by the other after: $(printf '%s\n' "${pickups[@]}" | summary)"
