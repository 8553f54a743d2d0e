#!/usr/bin/env bash
# The operator console in a real browser: headless Chromium (Debian's chromium and
# chromium-driver packages) driven by Selenium (PyPI) through Tests/console/test_console.py.
#
# It starts the debug relay that `swift build` made (Deploy/test.sh builds it first) the way
# Deploy/run.sh does with no configuration: the demo app delivering to the built-in sandbox, on a
# fresh embedded PostgreSQL in a temporary directory. Screenshots of every page go to
# CONSOLE_TEST_OUTPUT (default .build/console-test). Afterwards the relay's log is checked for the
# keys, the webhook secret, full device tokens and the notification's text.
#
# Usage: Deploy/console-test.sh [extra unittest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

selenium_version="4.38.0"
relay=".build/debug/push-relay"
output="${CONSOLE_TEST_OUTPUT:-$PWD/.build/console-test}"

log() { echo "console-test.sh: $*" >&2; }

# 1. The browser and its driver (apt), Selenium (PyPI), when missing.
missing=()
for package in chromium chromium-driver; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    log "installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! python3 -c "import selenium, sys; sys.exit(selenium.__version__ != '$selenium_version')" 2>/dev/null; then
    log "installing selenium $selenium_version"
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check "selenium==$selenium_version"
fi

[ -x "$relay" ] || { log "$relay is missing: run swift build first"; exit 1; }

# 2. A relay as `Deploy/run.sh` runs it with nothing configured: the demo app and its sandbox.
work="$(mktemp -d /tmp/push-relay-console.XXXXXX)"
chmod 755 "$work"
relay_pid=""
cleanup() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
create_key() {
    "$relay" keys create --data-dir "$work/data" "$@" --label console-test 2>>"$work/keys.log" | tail -n 1 | tr -d '\r'
}
admin_key="$(create_key --admin)"
app_key="$(create_key --app demo)"
case "$admin_key $app_key" in
    prk_*" "prk_*) ;;
    *) log "keys create failed:"; cat "$work/keys.log" >&2; exit 1 ;;
esac

# The banner (stdout) names the webhook URL, secret included; the log (stderr) must not.
"$relay" serve --data-dir "$work/data" --port "$port" > "$work/banner.txt" 2> "$work/relay.log" &
relay_pid=$!
for _ in $(seq 1 120); do
    curl -sf "$base/ready" >/dev/null && break
    kill -0 "$relay_pid" 2>/dev/null || break
    sleep 0.5
done
curl -sf "$base/ready" >/dev/null || { log "relay did not become ready:"; cat "$work/relay.log" >&2; exit 1; }
grep -q "Console: $base/console" "$work/banner.txt" || { log "the start-up lines do not name the console's URL:"; cat "$work/banner.txt" >&2; exit 1; }
webhook_url="$(grep -o "$base/v1/webhooks/zendesk/demo/[0-9a-f]*" "$work/banner.txt" | head -n 1)"
[ -n "$webhook_url" ] || { log "no webhook URL in the banner:"; cat "$work/banner.txt" >&2; exit 1; }

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
    "android-console-browser-token" "Console check reply" "Hello from the console test"; do
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
