#!/usr/bin/env bash
# PushRelayKit for Android (Clients/PushRelayKitAndroid) against a real relay: builds and checks
# the library (build.sh: javac --release 7, the Android API check, dx, the manifest), proves the
# checks catch violations (tools/checks-selftest.sh), starts `push-relay sandbox` and the debug
# relay that `swift build` made on an embedded PostgreSQL, runs the JUnit 5 tests and the Java
# example against them, and compiles a Kotlin consumer of the public API. Prints
# "PushRelayKit for Android: N passed, N failed".
#
# Usage: scripts/test/android-client.sh [extra JUnit console launcher options, e.g. --select-class io.pushrelay.kit.PushTest]
#   ANDROID_CLIENT_OUTPUT=DIR  where the library's artifacts and the test reports go (.build-android)
#   ANDROID_CLIENT_DIST=DIR    test the artifacts Deploy/release.sh built in DIR instead of building
#                              them (CI's release lane: the tests then run what is shipped)
set -euo pipefail
relay_binary="${RELAY_BINARY:-.build/debug/push-relay}"  # RELAY_BINARY: another build to test
. "$(dirname "$0")/../lib.sh"

library=Clients/PushRelayKitAndroid
output="${ANDROID_CLIENT_OUTPUT:-$PWD/.build-android}"
json_jar=/usr/share/java/com.android.json.jar
junit_jar=/usr/share/java/junit-platform-console-standalone.jar
[ -x "$relay_binary" ] || { log "$relay_binary is missing: run swift build first"; exit 1; }

# 1. The tools (build.sh installs its own; JUnit 5 and Kotlin are the tests').
apt_install_missing junit5 kotlin libandroid-json-java
step() { local name="$1" begun=$SECONDS; shift; "$@"; log "$name: $((SECONDS - begun)) s"; }

# 2. The library, built and checked (or as the release built it), and the checks' own test.
dist="${ANDROID_CLIENT_DIST:-$output/dist}"
if [ -z "${ANDROID_CLIENT_DIST:-}" ]; then
    step "library built and checked" "$library/build.sh" --out "$dist"
fi
step "the checks catch violations" "$library/tools/checks-selftest.sh"
jar=$(ls "$dist"/push-relay-kit-android-*.jar)
[ "$(wc -w <<<"$jar")" -eq 1 ] || { log "expected one push-relay-kit-android-*.jar in $dist, found: ${jar:-none}"; exit 1; }

# Every public type and member has a doc comment, and the comments are well-formed (javadoc's
# doclint; "-missing" leaves out @param/@return tags, which the comments give in prose).
check_docs() {
    mkdir -p "$output/annotations"
    javac -nowarn -d "$output/annotations" $(find "$library/src/compileOnly/java" -name '*.java')
    local args=(-quiet -Xmaxwarns 100000 -Xmaxerrs 100000 -d "$output/javadoc" -cp "$json_jar:$output/annotations" --release 8 $(find "$library/src/main/java" -name '*.java'))
    javadoc -Xdoclint:all "${args[@]}" >"$output/javadoc-all.log" 2>&1 || true
    javadoc -Xdoclint:all,-missing "${args[@]}" >"$output/javadoc.log" 2>&1 || echo "javadoc failed" >>"$output/javadoc.log"
    if grep -h 'no comment' "$output/javadoc-all.log" >&2 || grep -E 'warning|error|failed' "$output/javadoc.log" >&2; then
        log "the library's doc comments are missing or malformed (above)"
        return 1
    fi
}
step "doc comments" check_docs

# 3. The tests and the example, compiled for the JVM they run on (the library is Java 7 bytecode).
rm -rf "$output/test-classes" "$output/example-classes" "$output/guide-classes" "$output/reports"
mkdir -p "$output/test-classes" "$output/example-classes" "$output/guide-classes"
step "tests compiled" javac -encoding UTF-8 -Xlint:all -Werror -d "$output/test-classes" -cp "$jar:$json_jar:$junit_jar" \
    $(find "$library/src/test/java" -name '*.java')
step "example compiled" javac --release 8 -Xlint:all -Xlint:-options -Werror -encoding UTF-8 -d "$output/example-classes" \
    -cp "$jar:$json_jar" $(find "$library/src/example/java" -name '*.java')
# The guide's plain-Java snippets (docs/client.md, blocks starting "// Compiled:") are in
# src/docs/java, compiled here; each block must appear there as it is in the guide.
step "guide's snippets compiled" javac --release 8 -Xlint:all -Xlint:-options -Werror -encoding UTF-8 -d "$output/guide-classes" \
    -cp "$jar:$json_jar" $(find "$library/src/docs/java" -name '*.java')
python3 - docs/client.md "$library/src/docs/java/com/example/support/Guide.java" <<'PY'
import re, sys
def lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]
guide = lines(open(sys.argv[2]).read())
blocks = [b for b in re.findall(r"```java\n(.*?)```", open(sys.argv[1]).read(), re.S) if b.startswith("// Compiled:")]
missing = [b.splitlines()[0] for b in blocks if not any(guide[i:i + len(lines(b))] == lines(b) for i in range(len(guide)))]
if not blocks or missing:
    sys.exit(f"docs/client.md's compiled snippets differ from {sys.argv[2]}: {missing or 'none found'}")
print(f"android-client.sh: {len(blocks)} snippets of docs/client.md are as compiled", file=sys.stderr)
PY

# 4. The sandbox and a relay delivering to it: app `support` sends full pushes, `secure` encrypted ones.
work_dir android-client
sandbox_pid=""
trap '[ -z "$sandbox_pid" ] || kill "$sandbox_pid" 2>/dev/null || true; cleanup' EXIT
sandbox_port="$(free_port)"
"$relay_binary" sandbox --port "$sandbox_port" --directory "$work/sandbox" >"$work/sandbox.out" 2>"$work/sandbox.log" &
sandbox_pid=$!
for _ in $(seq 1 240); do
    grep -q '^sandbox: https' "$work/sandbox.out" 2>/dev/null && break
    kill -0 "$sandbox_pid" 2>/dev/null || break
    sleep 0.25
done
grep -q '^sandbox: https' "$work/sandbox.out" || { log "the sandbox did not start:"; cat "$work/sandbox.out" "$work/sandbox.log" >&2; exit 1; }
sandbox_url="https://localhost:$sandbox_port"
port="$(free_port)"
secret="android-$(random_hex 16)"
random_hex 32 >"$work/support-user-tokens.key"
random_hex 32 >"$work/secure-user-tokens.key"
fcm="{service_account_file: \"$work/sandbox/service-account.json\", url: \"$sandbox_url\"}"
cat >"$work/config.yaml" <<YAML
http:
  host: 127.0.0.1
  port: $port
log:
  level: warning
data:
  directory: $work/data
tls:
  ca_file: "$work/sandbox/sandbox-ca.pem"
delivery:
  poll_interval_ms: 100
  retry_base_ms: 100
unread:
  heartbeat_seconds: 1
  poll_after_seconds: 1
apps:
  - id: support
    webhook_secrets: ["$secret"]
    user_tokens: {secret_file: "$work/support-user-tokens.key"}
    fcm: $fcm
  - id: secure
    webhook_secrets: ["$secret"]
    user_tokens: {secret_file: "$work/secure-user-tokens.key"}
    fcm: $fcm
    push: {content: encrypted}
YAML
relay_start --config "$work/config.yaml"
admin_key="$(create_key --config "$work/config.yaml" --admin --label android-client)"

# 5. A Kotlin consumer, compiled while the tests run (they mostly wait for the relay): it compiles
#    against the public API, and nullability is visible (a @Nullable result assigned to a non-null
#    type must not compile).
kotlin_out="$output/kotlin"
rm -rf "$kotlin_out" && mkdir -p "$kotlin_out"
(
    kotlinc "$library/src/kotlin/Consumer.kt" -cp "$jar:$json_jar" -d "$kotlin_out/consumer.jar" >"$kotlin_out/consumer.log" 2>&1
    echo $? >"$kotlin_out/consumer.status"
    kotlinc "$library/src/kotlin/NullabilityCheck.kt" -cp "$jar:$json_jar" -d "$kotlin_out/check.jar" >"$kotlin_out/check.log" 2>&1
    echo $? >"$kotlin_out/check.status"
) &
kotlin_pid=$!

# 6. The tests. The launcher's own summary is a table; the line CI reads is printed below from
#    its XML report.
status=0
begun=$SECONDS
PUSH_RELAY_TEST_URL="http://127.0.0.1:$port" PUSH_RELAY_TEST_ADMIN_KEY="$admin_key" PUSH_RELAY_TEST_WEBHOOK_SECRET="$secret" \
    PUSH_RELAY_TEST_SANDBOX_URL="$sandbox_url" PUSH_RELAY_TEST_SANDBOX_CA="$work/sandbox/sandbox-ca.pem" \
    PUSH_RELAY_TEST_USER_TOKEN_KEY_SUPPORT="$work/support-user-tokens.key" \
    PUSH_RELAY_TEST_USER_TOKEN_KEY_SECURE="$work/secure-user-tokens.key" \
    java -jar "$junit_jar" --disable-banner --details=tree --fail-if-no-tests \
    -cp "$output/test-classes:$jar:$json_jar" --reports-dir "$output/reports" \
    "${@:---scan-classpath=$output/test-classes}" || status=$?
log "JUnit tests: $((SECONDS - begun)) s"
counts=$(python3 - "$output/reports" <<'PY'
import glob, sys, xml.etree.ElementTree as tree
passed = failed = 0
for report in glob.glob(sys.argv[1] + "/*.xml"):
    for case in tree.parse(report).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        else:
            passed += 1
print(passed, failed)
PY
)
read -r passed failed <<<"$counts"

# 7. The example against the same relay, as docs/client.md runs it.
begun=$SECONDS
if java -cp "$output/example-classes:$jar:$json_jar" io.pushrelay.kit.example.Example --relay "http://127.0.0.1:$port" \
    --app support --webhook-secret "$secret" --user-token-key-file "$work/support-user-tokens.key" >"$work/example.out" 2>&1; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    log "the example failed:"
    cat "$work/example.out" >&2
fi
log "example: $((SECONDS - begun)) s"

begun=$SECONDS
wait "$kotlin_pid" || true
if [ "$(cat "$kotlin_out/consumer.status" 2>/dev/null)" = 0 ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    log "the Kotlin consumer did not compile:"
    cat "$kotlin_out/consumer.log" >&2
fi
if [ "$(cat "$kotlin_out/check.status" 2>/dev/null)" = 0 ]; then
    failed=$((failed + 1))
    log "a nullable result assigned to a non-null type compiled: Kotlin does not see the library's @Nullable"
elif grep -qi "type mismatch" "$kotlin_out/check.log"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    log "the nullability check failed for another reason than a type mismatch:"
    cat "$kotlin_out/check.log" >&2
fi
log "Kotlin (waited after the tests): $((SECONDS - begun)) s"

# 8. What the relay's log must never hold.
for needle in "$secret" "$admin_key" "Reply on" "APA91b"; do
    if grep -qF -- "$needle" "$work/relay.log"; then
        failed=$((failed + 1))
        log "the relay's log holds a secret, a full token or notification text (${needle:0:6}…)"
    fi
done

echo "PushRelayKit for Android: $passed passed, $failed failed"
if ((status != 0 || failed != 0)); then
    cp "$work/relay.log" "$output/relay.log" 2>/dev/null || true
    log "failed; the relay's log is in $output/relay.log"
    exit 1
fi
