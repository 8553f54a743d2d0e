#!/usr/bin/env bash
# User-token cache benchmark: what many distinct, padded user tokens cost the relay's memory.
# Every app signs its own user tokens, so one app can mint any number, each up to the 4,096 bytes
# the relay accepts; the relay keeps each verified token (by its digest) in a cache bounded by
# auth.user_token_cache_mb and shared fairly between apps.
#
# Starts a relay (intake only, one app, the cache at CACHE_MB) on a fresh embedded durable
# PostgreSQL, reads its RSS, then polls GET …/users/uN/unread once with each of TOKENS distinct
# HS256 tokens (sub uN, a padding claim bringing each to about 4,000 bytes, under the 4,096 accepted; four keep-alive
# connections) and reads its RSS again. Prints the RSS before and after, the growth, the cache's
# bound and the growth over the bound. Without padding (PAD=0) the same with short tokens.
#
# Usage: scripts/bench/user-tokens.sh [tokens (100000)] [cache_mb (32)]
#   RELAY_BINARY=path: that build, not a new one; PAD=bytes: the padding claim's length (2900).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

tokens="${1:-100000}"
cache_mb="${2:-32}"
pad="${PAD:-2900}"
[[ "$tokens" =~ ^[1-9][0-9]*$ && "$cache_mb" =~ ^[1-9][0-9]*$ && "$pad" =~ ^[0-9]+$ ]] || usage
port="${BENCH_PORT:-18560}"

scripts/bootstrap.sh
[ -n "${RELAY_BINARY:-}" ] || build_products push-relay
work_dir user-tokens
bench_yaml="auth:
  user_token_cache_mb: $cache_mb"
bench_relay_config
relay_start --config "$work/config.yaml" --data-dir "$work/data"
machine_line
rss() { awk '/^VmRSS/ {print $2}' "/proc/$relay_pid/status"; }  # KiB
# Warm up the paths once (a few hundred polls) so the first figure is not the process's start.
python3 - "$port" "$user_token_key_file" 300 0 <<'PY' >/dev/null
import base64, hashlib, hmac, http.client, json, sys, time
port, key_file, count, pad = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
key = open(key_file, "rb").read().strip()
enc = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=")
connection = http.client.HTTPConnection("127.0.0.1", port)
for index in range(count):
    claims = {"sub": f"warm{index}", "exp": int(time.time()) + 3600}
    signing = enc(b'{"alg":"HS256","typ":"JWT"}') + b"." + enc(json.dumps(claims).encode())
    token = (signing + b"." + enc(hmac.new(key, signing, hashlib.sha256).digest())).decode()
    connection.request("GET", f"/v1/apps/bench/users/warm{index}/unread", headers={"Authorization": "Bearer " + token})
    connection.getresponse().read()
PY
before="$(rss)"
start=$SECONDS
python3 - "$port" "$user_token_key_file" "$tokens" "$pad" <<'PY'
import base64, hashlib, hmac, http.client, json, sys, threading, time
port, key_file, count, pad = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
key = open(key_file, "rb").read().strip()
enc = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=")
header = enc(b'{"alg":"HS256","typ":"JWT"}')
longest, failures = 0, []
def run(worker):
    global longest
    connection = http.client.HTTPConnection("127.0.0.1", port)
    for index in range(worker, count, 4):
        claims = {"sub": f"u{index}", "exp": int(time.time()) + 3600}
        if pad: claims["pad"] = "p" * pad
        signing = header + b"." + enc(json.dumps(claims).encode())
        token = (signing + b"." + enc(hmac.new(key, signing, hashlib.sha256).digest())).decode()
        longest = max(longest, len(token))
        connection.request("GET", f"/v1/apps/bench/users/u{index}/unread", headers={"Authorization": "Bearer " + token})
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200: failures.append(answer.status)
threads = [threading.Thread(target=run, args=(worker,)) for worker in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
if failures: sys.exit(f"{len(failures)} polls failed, first {failures[0]}")
print(f"{count} distinct tokens of up to {longest} bytes, each answered 200")
PY
after="$(rss)"
growth=$(((after - before) / 1024))
echo "  in $((SECONDS - start)) s; relay RSS $((before / 1024)) MiB before, $((after / 1024)) MiB after: +$growth MiB"
echo "  the cache's bound: $cache_mb MiB; growth over it: $((growth - cache_mb)) MiB"
