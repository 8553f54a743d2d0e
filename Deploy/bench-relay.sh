# Sourced by the benchmark scripts: starts a release relay with one app, `bench`, on a fresh
# embedded (durable) PostgreSQL in a temporary directory, waits until it is ready, and stops it and
# removes the directory on exit. Expects $port; sets $work, $secret, $user_token_key_file (the
# app's HS256 key for user tokens) and $relay. The app has no provider credentials, so delivery is
# off: these benchmarks measure intake, polls and admin jobs alone (push-relay-bench e2e measures
# delivery).

work="$(mktemp -d /tmp/push-relay-bench.XXXXXX)"
chmod 755 "$work"
secret="bench-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
user_token_key_file="$work/user-tokens.key"
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$user_token_key_file"
cat > "$work/config.yaml" <<YAML
http:
  port: $port
log:
  level: warning
delivery:
  enabled: false
apps:
  - id: bench
    webhook_secrets: ["$secret"]
    user_tokens:
      secret_file: $user_token_key_file
YAML

"${RELAY_BINARY:-.build/release/push-relay}" serve --config "$work/config.yaml" --data-dir "$work/data" > "$work/relay.log" 2>&1 &
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
