#!/usr/bin/env bash
# The operator console in a real browser: headless Chromium (Debian's chromium and
# chromium-driver packages) driven by Selenium (PyPI) through Tests/console/test_console.py.
#
# It starts the debug relay that `swift build` made (scripts/test.sh builds it first) the way
# scripts/run.sh does with no configuration: the demo app delivering to the built-in sandbox, on a
# fresh embedded PostgreSQL in a temporary directory. Screenshots of every page go to
# CONSOLE_TEST_OUTPUT (default .build/console-test). Afterwards the relay's log is checked for the
# keys, the webhook secret, full device tokens and the notification's text.
#
# Usage: scripts/test/console-test.sh [extra unittest arguments]
set -euo pipefail
relay_binary="${RELAY_BINARY:-.build/debug/push-relay}"  # RELAY_BINARY: another build to test
. "$(dirname "$0")/../lib.sh"

selenium_version="4.38.0"
output="${CONSOLE_TEST_OUTPUT:-$PWD/.build/console-test}"

# 1. The browser and its driver (apt), Selenium (PyPI), when missing.
apt_install_missing chromium chromium-driver
python3 -c "import selenium, sys; sys.exit(selenium.__version__ != '$selenium_version')" 2>/dev/null || pip_install "selenium==$selenium_version"

[ -x "$relay_binary" ] || { log "$relay_binary is missing: run swift build first"; exit 1; }

# 2. A relay as `scripts/run.sh` runs it with nothing configured: the demo app and its sandbox.
work_dir console
port="$(free_port)"
base="http://127.0.0.1:$port"

# The key of the apps managed through the console (test_08a), as docs/operations.md says to make it.
openssl rand -base64 32 > "$work/apps-store.key"
# The banner (stdout) names the webhook URL, secret included; the log (stderr) must not.
APPS_STORE_KEY_FILE="$work/apps-store.key" relay_start --data-dir "$work/data" --port "$port"
# Keys once `serve` has created the embedded cluster (`keys create` never creates one).
admin_key="$(create_key --data-dir "$work/data" --admin --label console-test)"
app_key="$(create_key --data-dir "$work/data" --app demo --label console-test)"
grep -q "Console: $base/console" "$work/relay.out" || { log "the start-up lines do not name the console's URL:"; cat "$work/relay.out" >&2; exit 1; }
webhook_url="$(grep -o "$base/v1/webhooks/zendesk/demo/[0-9a-f]*" "$work/relay.out" | head -n 1)"
[ -n "$webhook_url" ] || { log "no webhook URL in the banner:"; cat "$work/relay.out" >&2; exit 1; }

# 3. The browser tests.
rm -rf "$output"
mkdir -p "$output"
log "Chromium $(chromium --version 2>/dev/null | awk '{print $2}') against $base; screenshots in $output"
status=0
CONSOLE_BASE_URL="$base" CONSOLE_ADMIN_KEY="$admin_key" CONSOLE_APP_KEY="$app_key" CONSOLE_WEBHOOK_URL="$webhook_url" \
    CONSOLE_TEST_OUTPUT="$output" python3 Tests/console/test_console.py "$@" || status=$?

# 4. What the log must never hold, whatever the pages did.
secret="${webhook_url##*/}"
for needle in "$admin_key" "$app_key" "$secret" "6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e" \
    "android-console-browser-token" "browser-managed-secret-0123456789" "Console check reply" "Hello from the console test"; do
    if grep -qF -- "$needle" "$work/relay.log"; then
        log "the relay's log holds a secret, a full token or notification text (${needle:0:6}…):"
        grep -nF -- "$needle" "$work/relay.log" | head -n 5 >&2
        status=1
    fi
done
cp "$work/relay.log" "$output/relay.log"
if [ "$status" -ne 0 ]; then
    log "failed; the relay's log is in $output/relay.log"
fi
exit "$status"
