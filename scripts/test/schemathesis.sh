#!/usr/bin/env bash
# Property-based API test: runs schemathesis against the OpenAPI document the relay serves at
# GET /openapi.yaml, so the document and the server cannot drift apart unnoticed: a status code,
# content type, response schema, constraint, link or method that the document gets wrong fails.
#
# It starts the debug relay that `swift build` made (scripts/test.sh builds it first) on a fresh
# embedded PostgreSQL in a temporary directory, with one app and test data (keys, a user's
# devices, a webhook so unread counts exist, a job), so generated requests reach the handlers'
# logic instead of stopping at a 401 or 404. Deterministic (fixed seed) and bounded (a fixed number
# of examples per operation, two seeds): about two minutes on two cores.
#
# Usage: scripts/test/schemathesis.sh [extra `st run` options, given to both runs]
#   SCHEMATHESIS_DOCUMENT=FILE  test this document instead of the served one, such as an edited
#                               Sources/PushRelay/OpenAPI/openapi.yaml before the relay is rebuilt
# Exit status: non-zero when schemathesis reports any failure or error (its report is printed).
set -euo pipefail
relay_binary="${RELAY_BINARY:-.build/debug/push-relay}"  # RELAY_BINARY: another build to test
. "$(dirname "$0")/../lib.sh"

# Pinned: checks, generation and the configuration format change between releases, and a new
# release must not turn CI red (or green) by itself. Each run is made once per seed: a second seed
# generates other cases (one past Int64 in a cursor was found so), fixed so CI stays deterministic.
schemathesis_version="4.32.5"
seeds=(20251124 20261127)

# 1. schemathesis from PyPI when it is missing or another version.
st --version 2>/dev/null | grep -qF "version $schemathesis_version" || pip_install "schemathesis==$schemathesis_version"
# pip may put the `st` script where PATH does not look (~/.local/bin); the module always runs.
if st --version >/dev/null 2>&1; then st=(st); else st=(python3 -m schemathesis.cli); fi

[ -x "$relay_binary" ] || { log "$relay_binary is missing: run swift build first"; exit 1; }

# 2. A throwaway relay.
work_dir schemathesis
port="$(free_port)"
base="http://127.0.0.1:$port"
secret="schemathesis-$(random_hex 16)"
# The app's HS256 key for user JWTs, so the user-token code paths are on as in production.
random_hex 32 > "$work/user-tokens.key"
# The key of the apps managed through the admin API, so PUT /v1/admin/apps/{app} stores them.
openssl rand -base64 32 > "$work/apps-store.key"
# The user and device that generated requests find: the document's examples of {user} and
# {token}, so the examples phase (and the coverage phase, which starts from them) reaches them.
user="alice"
token="6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e"

# No APNs or FCM credentials, so delivery is off: webhooks queue deliveries that nobody sends.
cat > "$work/config.yaml" <<YAML
http:
  host: 127.0.0.1
  port: $port
log:
  level: warning
data:
  directory: $work/data
delivery:
  enabled: false
apps_store:
  key_file: $work/apps-store.key
apps:
  - id: support
    webhook_secrets: ["$secret"]
    user_tokens:
      secret_file: $work/user-tokens.key
YAML

# `serve` creates the embedded cluster; `keys create` then uses it (it never creates one).
relay_start --config "$work/config.yaml"
admin_key="$(create_key --config "$work/config.yaml" --admin --label schemathesis)"
app_key="$(create_key --config "$work/config.yaml" --app support --label schemathesis)"

# 3. Test data, through the API as an app backend and Zendesk would send it.
api() { # key method path json-body: fails on an error answer
    curl -sS --fail-with-body -o "$work/api.out" -X "$2" -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data-binary "$4" "$base$3" \
        || { log "setting up test data failed: $2 $3"; cat "$work/api.out" >&2; exit 1; }
}
api "$app_key" PUT "/v1/apps/support/devices/$token" "{\"platform\":\"ios\",\"user_id\":\"$user\"}"
api "$app_key" PUT "/v1/apps/support/devices/android-schemathesis" "{\"platform\":\"android\",\"user_id\":\"$user\"}"
# A reply on ticket 5, so the user has an unread count (and read / read-all something to clear).
api "" POST "/v1/webhooks/zendesk/support/$secret" \
    "{\"devices\":[{\"identifier\":\"$token\",\"type\":\"ios\"}],\"notification\":{\"title\":\"Agent replied\",\"body\":\"Hello\",\"ticket_id\":\"5\"}}"
# A job, so GET /v1/admin/jobs lists one.
api "$admin_key" POST "/v1/admin/apps/support/devices/bulk-unregister" '{"tokens":["android-gone"]}'

# A user JWT for the user above (HS256 over the app's key, an hour to live), for the second run.
user_jwt="$(python3 - "$work/user-tokens.key" "$user" <<'PY'
import base64, hashlib, hmac, json, sys, time
def b64(data): return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
key = open(sys.argv[1], "rb").read()
signed = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps({"sub": sys.argv[2], "exp": int(time.time()) + 3600}).encode())
print(signed + "." + b64(hmac.new(key, signed.encode(), hashlib.sha256).digest()))
PY
)"

# 4. schemathesis. Every check is on (schemathesis' default; not `--checks all`, which would also
#    override the two per-operation exceptions below): server errors, status codes, content types,
#    response schemas and headers, negative data rejected and positive data accepted, undeclared
#    methods answered 405 with Allow, missing auth answered 401, links (resources available after
#    creation, gone after deletion). Path parameters that must name configured things are fixed:
#    the app (any other is a 404 before any logic) and the webhook secret (a wrong one is a 404,
#    by design the same answer as an unknown app). Everything else is generated.
cat > "$work/schemathesis.toml" <<TOML
# No .schemathesis/ state in the work tree: replaying a case needs this throwaway relay anyway.
[cache]
enabled = false

[parameters]
"path.app" = "support"

# The stateful phase follows the document's links only. schemathesis starts its scenarios at
# operations it guesses create data; every operation under /v1/apps/{app} needs an app, which no
# operation creates (apps come from the configuration), so with its own link guesses (which make
# the job list a starting point) it would start at the job operations alone.
[phases.stateful]
inference.algorithms = []
# schemathesis 4.32.5 relabels a negative stateful case as positive when the fixed app above
# replaces one of its mutated path parameters: it re-checks the other path parameters in their
# percent-encoded form, where a control character (%0A) matches the document's pattern, and would
# report the relay's correct 400 as a valid request rejected. The other phases run this check.
checks.positive_data_acceptance.enabled = false
# The same fixing in the other direction: a stateful case whose only mutation was the app path
# parameter keeps its negative label after the fixed app replaces it, so the now valid request
# (seen: a GET of the notification just created, 200) is reported as invalid data accepted
# ("Invalid component: positive test case"). The other phases run this check too.
checks.negative_data_rejection.enabled = false

[[operations]]
include-operation-id = "receiveZendeskWebhook"
parameters = { "path.secret" = "$secret" }

# An iOS device needs an APNs token (hex, even length, 32-200 characters), an Android device any
# printable token: a rule joining a path parameter and the body, which OpenAPI cannot state. So a
# generated "valid" registration may rightly be a 400. Every other check runs here.
[[operations]]
include-operation-id = "registerDevice"
checks.positive_data_acceptance.enabled = false

# A text/plain or text/csv upload is text whatever schemathesis generates: its "incorrect type"
# mutations are serialised to text (an object becomes "{}"), which is a line of printable
# characters and so a valid token, rightly accepted. Negative JSON uploads are covered by the
# suite's AdminTests ("bad uploads get 400"); every other check runs here.
[[operations]]
include-operation-id = "bulkUnregister"
checks.negative_data_rejection.enabled = false

# The managed-app operations work on an app of their own: 'support' is the file's, and read-only
# there (409, which the file app's GET and the other checks still meet through the fixed app).
# A generated "valid" configuration is rightly a 422 when it has a credentials section: a P-256
# .p8 key or an RSA service account key is text no schema can describe. Every other check runs.
[[operations]]
include-operation-id = "putManagedApp"
parameters = { "path.app" = "schemathesis-managed" }
checks.positive_data_acceptance.enabled = false

[[operations]]
include-operation-id = "deleteManagedApp"
parameters = { "path.app" = "schemathesis-managed" }

# The live stream never ends: read its first event (sent on connect) and close it.
[[operations]]
include-operation-id = "streamUnread"
max-stream-events = 1
request-timeout = 5
TOML

document="${SCHEMATHESIS_DOCUMENT:-$base/openapi.yaml}"
status=0
run() { # label seed key extra-options...
    local label="$1" seed="$2" key="$3" start=$SECONDS code=0
    shift 3
    log "$label, seed $seed: $document against $base"
    "${st[@]}" --config-file "$work/schemathesis.toml" run "$document" \
        --url "$base" \
        --header "Authorization: Bearer $key" \
        --mode all \
        --phases examples,coverage,fuzzing,stateful \
        --seed "$seed" \
        --generation-database none \
        --request-timeout 10 \
        --workers 1 \
        --no-color \
        --output-sanitize false \
        "$@" || code=$?
    log "$label, seed $seed: schemathesis exited with $code after $((SECONDS - start)) s"
    [ "$code" -eq 0 ] || status=1
}
# Reports are not sanitised: the keys and secrets are this throwaway relay's, and a failure's
# curl line must reproduce it.
# One worker: Python 3.11.7's parser is not thread-safe ("AST constructor recursion depth
# mismatch" from Hypothesis in a second worker), and one is fast enough.
# The admin key reaches every operation (app keys get 403 on /v1/admin, else act the same).
for seed in "${seeds[@]}"; do
    run "admin key" "$seed" "$admin_key" --max-examples 40 "$@"
# The device and unread operations again as the user's app would call them, with the user's JWT:
# another user is 403 (or 404 to read a device), which the document must declare too. The status
# API is for API keys only (a user token is always 403 there), so it is left out of this run.
    run "user JWT" "$seed" "$user_jwt" --max-examples 15 --include-path-regex '^/v1/apps/' \
        --exclude-path-regex '/notifications|/deliveries$' "$@"
done

if [ "$status" -ne 0 ]; then
    log "FAILED; relay log (last 50 lines):"
    tail -n 50 "$work/relay.log" >&2
fi
exit "$status"
