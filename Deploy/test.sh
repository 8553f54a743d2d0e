#!/usr/bin/env bash
# Tests the release artifacts by running them. Builds them first (Deploy/release.sh, into
# .build-release/dist) unless --dist names a folder that holds them. Then, each against a
# PostgreSQL 15 started here and a `push-relay sandbox` run from the artifact under test:
#   tarball  its binary on a stock Debian 12 (mmdebstrap minbase plus only the packages its
#            DEPENDENCIES lists), in a chroot, as an unprivileged user;
#   deb      `apt-get install ./push-relay_*.deb` into a clean Debian 12 (minbase, nothing else):
#            dependencies pulled, user, files, docs and units as a Debian admin expects; without
#            DATABASE_URL `serve` refuses at once (exit status 78) and creates nothing; the relay
#            started by docs/operations.md's "Running without systemd" line, reloaded on SIGHUP
#            and by `push-relay reload --pid` (a refused file: 78), stopped on SIGTERM; then
#            purged, checking what postrm says it keeps;
#   systemd  a Debian 12 minbase with systemd booted in podman, docs/operations.md's Install block
#            run in it line by line as printed (a line the test does not know fails it): the
#            hardened units started, reloaded and stopped by systemd itself, and rated at most
#            2.5 by `systemd-analyze security --offline=true`; nothing but PushRelay's log lines
#            from the relay; a refused reload fails `systemctl reload`, at journal priority 3 or
#            4; an earlier build upgraded as the doc's "Upgrading the package" block prints it,
#            restarting the unit on this build; a database refusing the role and no database at
#            all stop the unit with exit status 78 (priority 3 or 4), not restarted;
#   image    the OCI archive loaded into podman (runc): sandbox and relay containers as a
#            non-root user with a read-only root filesystem, configured by file and environment,
#            `push-relay health` as the health check, a clean stop on SIGTERM;
# each posting the README's webhook and seeing both pushes (APNs and FCM) answered by the sandbox.
# The tarball's relay also serves PushRelayKit's example (two devices, a read, a user switch),
# the debug build of push-relay-kit-example run from here.
# Then Deploy/examples-check.sh (compose and Kubernetes examples) with the release binary. And,
# without a relay or PostgreSQL:
#   android  PushRelayKit for Android's .aar, .jar and .pom read back, not trusting build.sh: the
#            .aar's four entries and manifest (io.pushrelay.kit, minSdk 21, INTERNET); its
#            classes.jar and the .jar the same classes, io.pushrelay.kit's alone (no org.json,
#            androidx.annotation, test or example class), all of class version 51; dx and
#            `dexdump -c` on classes.jar, tools/api-check.py; the POM's coordinates, no dependencies.
# Every artifact a part tests must be listed in SHA256SUMS, and match it.
# Usage: Deploy/test.sh [--dist DIR] [--only tarball|deb|systemd|image|examples|android]
# Needs root (chroot, mounts, podman). Takes about 3 minutes past the build on 2 cores.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. Deploy/lib.sh

dist=""
only=""
while [ $# -gt 0 ]; do
    case "$1" in
    --dist) dist="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) usage ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { log "needs root (chroot, mounts, podman)"; exit 1; }
# The parts that run a relay (all but android) need the PostgreSQL started below and the tarball.
relays=1
[ "$only" = android ] && relays=0
if ((relays)); then apt_install_missing mmdebstrap podman runc uidmap postgresql curl python3; else apt_install_missing python3; fi
if [ -z "$dist" ]; then
    dist=.build-release/dist
    Deploy/release.sh --out "$dist"
fi
# The client library's example, run against the tarball's relay: PUSH_RELAY_KIT_EXAMPLE names a
# debug build of it (scripts/test.sh's, so no second SwiftPM waits on its .build), or it is built.
if [ -z "$only" ] || [ "$only" = tarball ]; then
    kit_example="${PUSH_RELAY_KIT_EXAMPLE:-}"
    if [ -z "$kit_example" ]; then
        swift build --product push-relay-kit-example >/dev/null
        kit_example="$(swift build --show-bin-path)/push-relay-kit-example"
    fi
    [ -x "$kit_example" ] || { log "no push-relay-kit-example at $kit_example"; exit 1; }
fi
(cd "$dist" && sha256sum --quiet -c SHA256SUMS)
# The build under test, from its tarball's name in SHA256SUMS (HEAD may have moved since the build):
# each build has its own version (Deploy/lib.sh, release_version).
version=$(sed -n 's/^[0-9a-f]*[ *]*push-relay-\(.*\)-linux-[^-]*\.tar\.gz$/\1/p' "$dist/SHA256SUMS")
[ "$(wc -w <<<"$version")" = 1 ] || { log "FAIL: SHA256SUMS in $dist lists no tarball, or several: ${version:-none}"; exit 1; }
debarch=$(dpkg --print-architecture)
tarball=""
((relays)) && tarball=$(ls "$dist"/push-relay-"$version"-linux-*.tar.gz)
deb="$dist/push-relay_${version}_$debarch.deb"
archive="$dist/push-relay-$version-oci.tar"
android="$dist/push-relay-kit-android-$version"
# The artifacts of the parts that run: each one there and listed in SHA256SUMS (checked just above).
tested=()
for part in tarball deb systemd image examples android; do
    [ -z "$only" ] || [ "$only" = "$part" ] || continue
    case "$part" in
    tarball | examples) tested+=("$tarball") ;;
    deb | systemd) tested+=("$deb") ;;
    image) tested+=("$archive") ;;
    android) tested+=("$android".{aar,jar,pom}) ;;
    esac
done
for artifact in "${tested[@]}"; do
    [ -f "$artifact" ] || { log "FAIL: no $(basename "$artifact") in $dist"; exit 1; }
    awk -v name="$(basename "$artifact")" '{ sub(/^\*/, "", $2) } $2 == name { found = 1 } END { exit !found }' "$dist/SHA256SUMS" ||
        { log "FAIL: $(basename "$artifact") is not listed in $dist/SHA256SUMS"; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-artifacts.XXXXXX")
chmod 0755 "$work"
mounts=()
pids=()
containers=()  # the ones this run started: the parts run side by side (scripts/test.sh)
cleanup() {
    local status=$?
    if ((status != 0)) && [ -d "$work" ]; then
        # What the relays and sandboxes printed, for reading a failed run.
        local logs=.build-release/artifact-test-logs/${only:-all}
        rm -rf "$logs" && mkdir -p "$logs"
        find "$work" -maxdepth 1 -type f \( -name '*.log' -o -name '*.out' -o -name '*.err' \) -exec cp {} "$logs/" \;
        podman_env
        [[ " ${containers[*]} " == *" pr-test-relay "* ]] && { podman logs pr-test-relay >"$logs/image-relay.log" 2>&1 || true; }
        [[ " ${containers[*]} " == *" pr-test-systemd "* ]] && { podman exec pr-test-systemd journalctl --no-pager >"$logs/systemd-journal.log" 2>&1 || true; }
        log "logs in $logs/"
    fi
    podman_env
    # One by one: podman 4.3's `rm -f A B C` stops at the first that does not exist.
    local container
    for container in "${containers[@]}"; do podman rm -f -t 0 "$container" >/dev/null 2>&1 || true; done
    local index
    for ((index = ${#mounts[@]} - 1; index >= 0; index--)); do umount -l "${mounts[index]}" 2>/dev/null || true; done
    ((${#pids[@]})) && kill -9 "${pids[@]}" 2>/dev/null || true
    [ -d "$work/pg" ] && runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

fail() { log "FAIL: $*"; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# waits up to $2 seconds for `$1` (a command) to succeed.
wait_for() {
    local deadline=$((SECONDS + $2))
    until eval "$1" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
}

# doc_block FILE HEADING: the shell lines of the first ```sh block after the line HEADING (exactly
# as written, such as "### Debian: the package") in FILE, without comments (from " #" on) and
# blank lines: the commands a test runs as the doc prints them. Fails when there are none.
doc_block() {
    awk -v heading="$2" '
        !found { if ($0 == heading) found = 1; next }
        !inside { if ($0 == "```sh") inside = 1; next }
        /^```/ { exit }
        { sub(/^#.*/, ""); sub(/[ \t]+#.*/, ""); sub(/[ \t]+$/, "") }
        /./ { print; printed = 1 }
        END { exit !printed }
    ' "$1"
}

# PostgreSQL 15 on this machine, one database per artifact.
if ((relays)); then
    pg_port=$(free_port)
    install -d -o postgres -g postgres "$work/pg"
    runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$work/pg" --auth=trust -U postgres >/dev/null
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$work/pg" -l "$work/pg/log" -w \
        -o "-c listen_addresses=127.0.0.1 -c port=$pg_port -c unix_socket_directories=$work/pg" start >/dev/null
    for name in tarball deb systemd image; do
        psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "CREATE DATABASE relay_$name" postgres
    done
fi
database_url() { echo "postgresql://postgres@127.0.0.1:$pg_port/relay_$1"; }

# A Debian root filesystem in $1 with /proc, /dev and /sys, and this machine's resolver.
prepare_root() {
    mount -t proc proc "$1/proc" && mounts+=("$1/proc")
    mount --rbind /dev "$1/dev" && mounts+=("$1/dev")
    mount --rbind /sys "$1/sys" && mounts+=("$1/sys")
    cp -L /etc/resolv.conf "$1/etc/resolv.conf"
}

# The sandbox's printed configuration (tls and apps) from its output file $1, once it is whole.
sandbox_config() { sed -n '/^tls:/,$p' "$1"; }
sandbox_secret() { sed -n 's/.*webhook_secrets: \["\([^"]*\)"\].*/\1/p' "$1"; }
sandbox_ready() { grep -q 'url: https' "$1" 2>/dev/null && [ "$(sandbox_config "$1" | grep -c 'url: https')" -ge 2 ]; }

# A relay configuration: listen on $1, the sandbox's tls and apps sections from output file $2.
relay_config() {
    printf 'http:\n  host: 127.0.0.1\n  port: %s\n' "$1"
    sandbox_config "$2"
}

readme_webhook='{"devices":[{"identifier":"6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e","type":"ios"},{"identifier":"android-demo-token","type":"android"}],"notification":{"title":"Agent replied","body":"Hello","ticket_id":"5"}}'

# posts the README's webhook to the relay on port $1 for the sandbox whose output is in $2 and
# whose CA file (seen from here) is $3; checks that the sandbox answered both pushes with 200.
deliver() {
    local relay_port="$1" output="$2" ca="$3" name="$4"
    local secret sandbox_url answer
    secret=$(sandbox_secret "$output")
    sandbox_url=$(sed -n 's/^sandbox: \(https:[^ ]*\).*/\1/p' "$output")
    wait_for "curl -sf http://127.0.0.1:$relay_port/ready" 60 || fail "$name: /ready did not answer 200 in 60 s"
    answer=$(curl -s -X POST -H 'Content-Type: application/json' -d "$readme_webhook" \
        "http://127.0.0.1:$relay_port/v1/webhooks/zendesk/sandbox/$secret")
    echo "$answer" | grep -q '"deliveries":2' || fail "$name: the webhook was answered $answer"
    local received=""
    local deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        received=$(curl -s --cacert "$ca" "$sandbox_url/sandbox/received" || true)
        if python3 - "$received" <<'EOF'; then
import json, sys
requests = json.loads(sys.argv[1])["requests"]
apns = [r for r in requests if r["service"] == "apns" and r["path"].endswith("/6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e") and r["status"] == 200]
fcm = [r for r in requests if r["service"] == "fcm" and "android-demo-token" in r["body"] and r["status"] == 200]
sys.exit(0 if apns and fcm and '"zendesk_sdk_request_id":"5"' in apns[0]["body"] else 1)
EOF
            log "$name: webhook $answer; the sandbox answered the APNs and the FCM push with 200"
            return 0
        fi
        sleep 0.5
    done
    fail "$name: the sandbox did not receive both pushes in 30 s; it received: $received"
}

test_tarball() {
    local root="$work/tarball-root"
    local packages
    packages=$(tar -xOzf "$tarball" --wildcards '*/DEPENDENCIES' | sed -n '3p' | xargs)
    log "tarball: $(basename "$tarball") on Debian 12 minbase + $packages"
    debian_rootfs minbase "$packages" "$root"
    prepare_root "$root"
    tar -C "$root/opt" -xzf "$tarball"
    cmp -s LICENSE "$root"/opt/push-relay-*/LICENSE || fail "tarball: no LICENSE, or not the repository's"
    compgen -G "$root/opt/push-relay-*/docs/operations.md" >/dev/null || fail "tarball: no docs/operations.md (the README's links)"
    local binary
    binary=$(cd "$root" && ls -d opt/push-relay-*/bin/push-relay)
    chroot "$root" "/$binary" --version | grep -q "^$version (commit " || fail "tarball: --version: $(chroot "$root" "/$binary" --version)"
    local missing
    missing=$(chroot "$root" ldd "/$binary" | grep 'not found' || true)
    [ -z "$missing" ] || fail "tarball: libraries missing on Debian 12 with the listed packages: $missing"
    local sandbox_port relay_port
    sandbox_port=$(free_port)
    relay_port=$(free_port)
    chroot --userspec=65534:65534 "$root" "/$binary" sandbox --port "$sandbox_port" --directory /tmp/sandbox >"$work/tarball-sandbox.out" 2>"$work/tarball-sandbox.err" &
    pids+=($!)
    wait_for "sandbox_ready $work/tarball-sandbox.out" 60 || fail "tarball: the sandbox printed no configuration: $(cat "$work/tarball-sandbox.err")"
    # With user tokens, for PushRelayKit's example below.
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$root/tmp/user-tokens.key"
    chown 65534:65534 "$root/tmp/user-tokens.key" && chmod 0600 "$root/tmp/user-tokens.key"
    relay_config "$relay_port" "$work/tarball-sandbox.out" |
        sed 's|^\(    webhook_secrets: .*\)$|\1\n    user_tokens: {secret_file: /tmp/user-tokens.key}|' >"$root/tmp/relay.yaml"
    printf 'unread:\n  poll_after_seconds: 1\n' >>"$root/tmp/relay.yaml"
    chroot --userspec=65534:65534 "$root" env -i PATH=/usr/bin:/bin HOME=/tmp DATABASE_URL="$(database_url tarball)" \
        "/$binary" serve --config /tmp/relay.yaml >"$work/tarball-relay.log" 2>&1 &
    local relay=$!
    pids+=("$relay")
    deliver "$relay_port" "$work/tarball-sandbox.out" "$root/tmp/sandbox/sandbox-ca.pem" tarball
    "$kit_example" --relay "http://127.0.0.1:$relay_port" --app sandbox --webhook-secret "$(sandbox_secret "$work/tarball-sandbox.out")" \
        --user-token-key-file "$root/tmp/user-tokens.key" --delay 1 >"$work/kit-example.out" 2>&1 ||
        fail "tarball: push-relay-kit-example failed: $(cat "$work/kit-example.out")"
    sed "s/^/$script_name: tarball: PushRelayKit's example: /" "$work/kit-example.out" >&2
    kill -TERM "$relay"
    wait "$relay" || fail "tarball: serve exited $? on SIGTERM: $(tail -5 "$work/tarball-relay.log")"
    log "tarball: stopped cleanly on SIGTERM"
}

# The "Running without systemd" block of docs/operations.md: its one line, which this test runs as
# written. Any other text fails the test, so the doc and the test cannot drift apart.
without_systemd_line='cd /var/lib/push-relay && exec setpriv --reuid=push-relay --regid=push-relay --init-groups --reset-env push-relay serve --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment'

# refused_without_database ROOT WHEN: serve in the chroot ROOT as the package's user, with its
# configuration and environment file, must exit at once with status 78 and create nothing.
refused_without_database() {
    local root="$1" status=0
    timeout 30 chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'cd /var/lib/push-relay &&
        runuser -u push-relay -- push-relay serve --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment' \
        >"$work/deb-no-database.log" 2>&1 || status=$?
    [ "$status" = 78 ] || fail "deb: serve $2 exited with $status, not 78: $(tail -5 "$work/deb-no-database.log")"
    [ ! -e "$root/var/lib/push-relay/.push-relay-data" ] || fail "deb: serve $2 created /var/lib/push-relay/.push-relay-data"
    grep -q 'database\.url' "$work/deb-no-database.log" || fail "deb: serve $2 did not name database.url: $(cat "$work/deb-no-database.log")"
}

# deb_reload PID: `push-relay reload --pid PID` in the deb test's chroot, as the package's user.
deb_reload() { chroot "$work/deb-root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin runuser -u push-relay -- push-relay reload --pid "$1"; }

test_deb() {
    local root="$work/deb-root"
    log "deb: $(basename "$deb") into a clean Debian 12 (minbase)"
    # Read from the package: the test root filesystems exclude /usr/share/doc.
    local copyright
    copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/push-relay/copyright)
    grep -qx 'License: Apache-2.0' <<<"$copyright" || fail "deb: /usr/share/doc/push-relay/copyright does not name License: Apache-2.0"
    # The documents postinst and the README point to, beside the README.
    local doc contents
    contents=$(dpkg-deb -c "$deb")
    for doc in README.md operations.md runbooks.md configuration.md; do
        grep -q " \./usr/share/doc/push-relay/$doc\$" <<<"$contents" || fail "deb: no /usr/share/doc/push-relay/$doc in the package"
    done
    debian_rootfs minbase "" "$root"
    prepare_root "$root"
    cp "$deb" "$root/tmp/"
    chroot "$root" apt-get update -qq
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
        >"$work/deb-install.log" 2>&1 || fail "deb: apt-get install failed: $(tail -20 "$work/deb-install.log")"
    log "deb: apt-get install pulled $(grep -c '^Setting up' "$work/deb-install.log") packages; postinst said: $(sed -n '/^push-relay:/,/^  then /p' "$work/deb-install.log")"
    grep -q -- '--env-file /etc/push-relay/environment' "$work/deb-install.log" || fail "deb: postinst's next steps do not give the config check with --env-file"
    grep -q '/usr/share/doc/push-relay/operations\.md' "$work/deb-install.log" || fail "deb: postinst's next steps do not point to /usr/share/doc/push-relay/operations.md"
    chroot "$root" dpkg-query -W -f='${Status}\n' push-relay | grep -q 'install ok installed' || fail "deb: not installed"
    chroot "$root" getent passwd push-relay | grep -q ':/var/lib/push-relay:/usr/sbin/nologin$' || fail "deb: no push-relay system user"
    [ "$(chroot "$root" stat -c '%U:%G %a' /etc/push-relay/push-relay.yaml)" = "root:push-relay 640" ] || fail "deb: /etc/push-relay/push-relay.yaml owner or mode"
    [ "$(chroot "$root" stat -c '%U:%G %a' /etc/push-relay/environment)" = "root:push-relay 640" ] || fail "deb: /etc/push-relay/environment owner or mode"
    [ "$(chroot "$root" stat -c '%U:%G %a' /var/lib/push-relay)" = "push-relay:push-relay 750" ] || fail "deb: /var/lib/push-relay owner or mode"
    local unit="$root/lib/systemd/system/push-relay.service"
    [ -f "$root/lib/systemd/system/push-relay@.service" ] || fail "deb: no template unit"
    local exec_start reload
    exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
    [ "$exec_start" = "/usr/bin/push-relay serve --config /etc/push-relay/push-relay.yaml" ] || fail "deb: ExecStart=$exec_start"
    # Both units reload through push-relay reload, which waits for the relay's answer.
    for reload in "$unit" "$root/lib/systemd/system/push-relay@.service"; do
        reload=$(sed -n 's/^ExecReload=//p' "$reload")
        [ "$reload" = '/usr/bin/push-relay reload --pid $MAINPID' ] || fail "deb: ExecReload=$reload"
    done
    # What docs/operations.md's "Running without systemd" line repeats, and the unit's refusals.
    local setting
    for setting in User=push-relay WorkingDirectory=/var/lib/push-relay EnvironmentFile=-/etc/push-relay/environment \
        Environment=DATABASE_EMBEDDED=false RestartPreventExitStatus=78; do
        grep -qx -- "$setting" "$unit" || fail "deb: push-relay.service has no $setting"
    done
    chroot "$root" push-relay --version | grep -q "^$version (commit " || fail "deb: --version"
    # A bare `keys create` on the package host (no --config, --env-file): refused (78), saying how to run it.
    local status=0
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'cd / && push-relay keys create --admin --label ops' >"$work/deb-keys.log" 2>&1 ||
        status=$?
    [ "$status" = 78 ] && grep -q -- '--env-file /etc/push-relay/environment' "$work/deb-keys.log" ||
        fail "deb: a bare keys create exited $status: $(cat "$work/deb-keys.log")"
    local uid gid
    uid=$(chroot "$root" id -u push-relay)
    gid=$(chroot "$root" id -g push-relay)
    # serve as the package leaves it, without systemd: the example configuration (database.embedded:
    # false) and postinst's environment file are refused at once with the configuration's exit
    # status, naming database.url before the example's key files, and nothing is created.
    refused_without_database "$root" "as installed"
    log "deb: as installed, serve refused at once (exit status 78): $(grep -m1 . "$work/deb-no-database.log")"
    # Configure it as an operator would: the sandbox's keys under the state directory, the
    # relay's configuration in /etc/push-relay (keeping the package's database.embedded: false),
    # then DATABASE_URL in the environment file.
    local sandbox_port relay_port
    sandbox_port=$(free_port)
    relay_port=$(free_port)
    chroot --userspec="$uid:$gid" "$root" /usr/bin/push-relay sandbox --port "$sandbox_port" \
        --directory /var/lib/push-relay/sandbox >"$work/deb-sandbox.out" 2>"$work/deb-sandbox.err" &
    local sandbox=$!
    pids+=("$sandbox")
    wait_for "sandbox_ready $work/deb-sandbox.out" 60 || fail "deb: the sandbox printed no configuration: $(cat "$work/deb-sandbox.err")"
    { relay_config "$relay_port" "$work/deb-sandbox.out" && printf 'database:\n  embedded: false\n'; } >"$root/etc/push-relay/push-relay.yaml"
    # With the operator's apps in place, serve refuses for the missing DATABASE_URL alone, and says so.
    refused_without_database "$root" "without DATABASE_URL"
    log "deb: without DATABASE_URL serve refused at once (exit status 78): $(grep -m1 'database\.url' "$work/deb-no-database.log")"
    echo "DATABASE_URL=$(database_url deb)" >>"$root/etc/push-relay/environment"
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin runuser -u push-relay -- push-relay config check \
        --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment >"$work/deb-check.log" 2>&1 ||
        fail "deb: config check: $(cat "$work/deb-check.log")"
    grep '^database: ' "$work/deb-check.log" | grep -q 'dbname=relay_deb' ||
        fail "deb: config check with --env-file does not name the environment file's database: $(grep '^database' "$work/deb-check.log")"
    # Started as docs/operations.md says for a host without systemd, as a supervisor would: the
    # process started is the relay itself, so SIGHUP and SIGTERM reach it.
    local line
    line=$(doc_block docs/operations.md '### Running without systemd') || fail "deb: no sh block under '### Running without systemd' in docs/operations.md"
    [ "$line" = "$without_systemd_line" ] || fail "deb: docs/operations.md's 'Running without systemd' block is not what this test knows: $line"
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c "$line" >"$work/deb-relay.log" 2>&1 &
    local relay=$! real_root
    pids+=("$relay")
    real_root=$(readlink -f "$root")
    wait_for "[ \"\$(readlink /proc/$relay/exe)\" = '$real_root/usr/bin/push-relay' ]" 10 ||
        fail "deb: the process started is $(readlink "/proc/$relay/exe"), not push-relay: $(tail -5 "$work/deb-relay.log")"
    local relay_uid
    relay_uid=$(awk '/^Uid:/ { print $2 }' "/proc/$relay/status")
    [ "$relay_uid" = "$uid" ] || fail "deb: the relay runs as uid $relay_uid, not push-relay's $uid"
    tr '\0' '\n' <"/proc/$relay/environ" | grep -qx 'HOME=/var/lib/push-relay' ||
        fail "deb: the relay's HOME is not /var/lib/push-relay: $(tr '\0' '\n' <"/proc/$relay/environ" | grep '^HOME=')"
    [ "$(readlink "/proc/$relay/cwd")" = "$real_root/var/lib/push-relay" ] || fail "deb: the relay's working directory is $(readlink "/proc/$relay/cwd")"
    deliver "$relay_port" "$work/deb-sandbox.out" "$root/var/lib/push-relay/sandbox/sandbox-ca.pem" deb
    kill -HUP "$relay"
    wait_for "grep -q 'configuration reloaded' $work/deb-relay.log" 20 || fail "deb: no reload after SIGHUP: $(tail -5 "$work/deb-relay.log")"
    # `push-relay reload --pid`, as docs/operations.md gives it for a host without systemd: it waits
    # for the relay's answer; a refused file exits 78 with the reason, and a process that is not a
    # relay 1.
    deb_reload "$relay" >"$work/deb-reload.out" 2>&1 || fail "deb: push-relay reload --pid exited $?: $(cat "$work/deb-reload.out")"
    grep -q '^configuration reloaded' "$work/deb-reload.out" || fail "deb: push-relay reload printed: $(cat "$work/deb-reload.out")"
    cp -p "$root/etc/push-relay/push-relay.yaml" "$work/deb-good.yaml"
    echo 'no_such_setting: 1' >>"$root/etc/push-relay/push-relay.yaml"
    status=0
    deb_reload "$relay" >"$work/deb-reload.out" 2>&1 || status=$?
    [ "$status" = 78 ] && grep -q '^Error: configuration reload refused' "$work/deb-reload.out" ||
        fail "deb: push-relay reload of a refused file exited $status: $(cat "$work/deb-reload.out")"
    log "deb: push-relay reload --pid of a refused file: exit status 78, $(head -1 "$work/deb-reload.out")"
    cp -p "$work/deb-good.yaml" "$root/etc/push-relay/push-relay.yaml"
    status=0
    deb_reload "$sandbox" >"$work/deb-reload.out" 2>&1 || status=$?
    [ "$status" = 1 ] || fail "deb: push-relay reload --pid of a sandbox exited $status, not 1: $(cat "$work/deb-reload.out")"
    kill -TERM "$relay"
    wait "$relay" || fail "deb: serve exited $? on SIGTERM: $(tail -5 "$work/deb-relay.log")"
    log "deb: run as docs/operations.md says without systemd (user push-relay, HOME and working directory /var/lib/push-relay): reloaded on SIGHUP and by push-relay reload, stopped cleanly on SIGTERM"
    # A file of the operator's: purge leaves it, and says so.
    install -m 0640 -o root -g "$gid" /dev/null "$root/etc/push-relay/operator-key.p8"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq push-relay >"$work/deb-purge.log" 2>&1 ||
        fail "deb: purge failed: $(tail -5 "$work/deb-purge.log")"
    if [ -e "$root/usr/bin/push-relay" ] || [ -e "$root/lib/systemd/system/push-relay.service" ]; then fail "deb: the package's files left after purge"; fi
    if [ -e "$root/etc/push-relay/environment" ] || [ -e "$root/etc/push-relay/push-relay.yaml" ]; then
        fail "deb: purge left the environment file or the configuration: $(ls -A "$root/etc/push-relay")"
    fi
    [ -e "$root/etc/push-relay/operator-key.p8" ] || fail "deb: purge removed a file the operator added to /etc/push-relay"
    grep -q '^push-relay: kept /etc/push-relay: operator-key.p8 (' "$work/deb-purge.log" ||
        fail "deb: purge did not name the file left in /etc/push-relay: $(grep '^push-relay:' "$work/deb-purge.log")"
    grep -q '^push-relay: kept /var/lib/push-relay ' "$work/deb-purge.log" || fail "deb: purge did not say /var/lib/push-relay is kept"
    log "deb: purged (binary, units, environment file and configuration gone); it said: $(grep '^push-relay:' "$work/deb-purge.log" | tr '\n' ' ')"
}

# A command in the systemd test's container; a unit's journal there; the journal's cursor now, and
# a unit's lines after one.
in_container() { podman exec pr-test-systemd "$@"; }
unit_journal() { in_container journalctl -u "$1" -o cat --no-pager; }
journal_cursor() { in_container journalctl -n 1 --show-cursor -o cat --no-pager | sed -n 's/^-- cursor: //p'; }
unit_journal_since() { in_container journalctl -u "$1" --after-cursor "$2" -o cat --no-pager; }
main_pid() { in_container systemctl show -p MainPID --value "$1"; }
# The "version" in /ready's answer on port $1 in the systemd test's container.
ready_version() { in_container curl -s "localhost:$1/ready" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p'; }

# journal_priorities UNIT CURSOR PATTERN: the syslog priority (journald's PRIORITY) of each line of
# UNIT after CURSOR whose message matches PATTERN (a Python regular expression), one a line.
journal_priorities() {
    in_container journalctl -u "$1" --after-cursor "$2" -o json --no-pager | python3 -c '
import json, re, sys
for line in sys.stdin:
    entry = json.loads(line)
    message = entry.get("MESSAGE") or ""
    if isinstance(message, list):
        message = bytes(message).decode("utf-8", "replace")
    if re.search(sys.argv[1], message):
        print(entry.get("PRIORITY", "none"))
' "$3"
}
# Whether there are priorities on standard input, each 3 (err) or 4 (warning) or more urgent.
errors_or_warnings() { awk '!/^[0-4]$/ { bad = 1 } END { exit bad || NR == 0 }'; }

# A PushRelay log line in text format (Sources/PushRelay/Observability/RelayLogHandler.swift):
# `<RFC 3339 time, UTC, to the millisecond> <level> <label>: …`, journald having taken off the
# line's priority prefix.
log_line='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z (trace|debug|info|notice|warning|error|critical) [^ ]+:( |$)'

# earlier_deb DIR: an earlier build made from the .deb under test, in DIR: the same package with a
# lower Version and, in its binary, the version string replaced in place by an earlier one of the
# same length (<base>.20000101000000.g000000000000), so that --version and /ready tell the two
# apart. Prints the earlier version. A tagged release's version (<base> alone, also elsewhere in
# the binary) is not patched: its earlier build is Version <base>~0 with the same binary.
earlier_deb() {
    local dir="$1" unpacked="$work/earlier-deb" earlier
    if [[ $version =~ \.[0-9]{14}\.g[0-9a-f]{12}(\.modified)?$ ]]; then
        earlier="$(base_of "$version").20000101000000.g000000000000${BASH_REMATCH[1]}"
    else
        earlier="$version~0"
    fi
    rm -rf "$unpacked" && dpkg-deb -R "$deb" "$unpacked" || return 1
    sed -i "s/^Version: .*/Version: $earlier/" "$unpacked/DEBIAN/control"
    if [ "$earlier" != "$version~0" ]; then
        python3 - "$unpacked/usr/bin/push-relay" "$version" "$earlier" <<'EOF' || return 1
import sys
path, old, new = sys.argv[1], sys.argv[2].encode() + b"\0", sys.argv[3].encode() + b"\0"
data = open(path, "rb").read()
if len(old) != len(new) or data.count(old) != 1:
    sys.exit("earlier_deb: %s is %d times in the binary, not once" % (sys.argv[2], data.count(old)))
open(path, "wb").write(data.replace(old, new))
EOF
    fi
    mkdir -p "$dir"
    dpkg-deb --root-owner-group -Znone --build "$unpacked" "$dir/push-relay_${earlier}_$debarch.deb" >/dev/null || return 1
    echo "$earlier"
}

# The .deb under a real systemd: Debian 12 minbase with systemd, curl and the package's
# dependencies, booted in podman (every capability, as systemd has on a host; the host's network,
# so the relay reaches this machine's PostgreSQL). docs/operations.md's Install block is run as
# printed, line by line, while systemd runs; then systemctl reloads and stops the hardened units as
# installed, and the unit meets a database that refuses it and no database at all.
# refused_start WHAT PATTERN: (re)starts push-relay.service in the systemd test's container, which
# must end failed with exit status 78 and no restart, its journal matching PATTERN. With a restart
# due the unit would be activating (auto-restart) for RestartSec=2, not failed, so failed is final.
refused_start() {
    local what="$1" pattern="$2" container=pr-test-systemd cursor status
    in_container systemctl reset-failed push-relay.service 2>/dev/null || true
    cursor=$(journal_cursor)
    in_container systemctl restart push-relay.service || true
    wait_for "[ \"\$(podman exec $container systemctl show -p ActiveState --value push-relay.service)\" = failed ]" 30 ||
        fail "systemd: $what, push-relay.service is not failed after 30 s: $(in_container systemctl show -p ActiveState -p SubState -p NRestarts push-relay.service | xargs); $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    status=$(in_container systemctl show -p ExecMainStatus -p NRestarts push-relay.service | sort | xargs)
    [ "$status" = "ExecMainStatus=78 NRestarts=0" ] ||
        fail "systemd: $what, push-relay.service ended with $status, not ExecMainStatus=78 NRestarts=0: $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    wait_for "unit_journal_since push-relay.service '$cursor' | grep -q '$pattern'" 10 ||
        fail "systemd: $what, the journal does not say why: $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    # At journal priority err or warning, as `journalctl -p warning` (runbooks.md) shows it.
    local priorities
    priorities=$(journal_priorities push-relay.service "$cursor" "$pattern")
    errors_or_warnings <<<"$priorities" || fail "systemd: $what, the lines saying why are at journal priorities ${priorities//$'\n'/ }, not 3 or 4"
    log "systemd: $what: exit status 78, not restarted, at journal priority ${priorities//$'\n'/ }: $(unit_journal_since push-relay.service "$cursor" | grep -m1 "$pattern")"
}

# systemd_reloads PORT: push-relay.service, started and serving on PORT, reloaded by systemctl:
# ExecReload's `push-relay reload` waits for the relay's answer, so a refused file fails systemctl
# reload, and systemctl status and `journalctl -p warning` say why. A SIGHUP reloads too.
systemd_reloads() {
    local port="$1" pid cursor priorities yaml="$root/etc/push-relay/push-relay.yaml"
    pid=$(main_pid push-relay.service)
    cursor=$(journal_cursor)
    in_container systemctl reload push-relay.service >"$work/systemd-reload.out" 2>&1 ||
        fail "systemd: systemctl reload failed: $(cat "$work/systemd-reload.out"); $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    wait_for "unit_journal_since push-relay.service '$cursor' | grep -q 'configuration reloaded'" 10 ||
        fail "systemd: no reload logged after systemctl reload: $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    cursor=$(journal_cursor)
    in_container systemctl kill -s HUP --kill-who=main push-relay.service
    wait_for "unit_journal_since push-relay.service '$cursor' | grep 'configuration reloaded' | grep -q SIGHUP" 20 ||
        fail "systemd: no reload logged after SIGHUP: $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    # A file the relay refuses.
    cp -p "$yaml" "$work/systemd-good.yaml"
    echo 'no_such_setting: 1' >>"$yaml"
    cursor=$(journal_cursor)
    if in_container systemctl reload push-relay.service >"$work/systemd-reload.out" 2>&1; then
        fail "systemd: systemctl reload of a refused file exited 0: $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    fi
    in_container systemctl status push-relay >"$work/systemd-status.out" 2>&1 || true
    grep -q 'configuration reload refused' "$work/systemd-status.out" ||
        fail "systemd: systemctl status does not show why the reload failed: $(tail -8 "$work/systemd-status.out")"
    wait_for "in_container journalctl -u push-relay.service --after-cursor '$cursor' -p warning -o cat --no-pager | grep -q 'configuration reload refused'" 10 ||
        fail "systemd: journalctl -p warning shows no 'configuration reload refused': $(unit_journal_since push-relay.service "$cursor" | tail -5)"
    priorities=$(journal_priorities push-relay.service "$cursor" 'configuration reload refused')
    errors_or_warnings <<<"$priorities" || fail "systemd: the refused reload's lines are at journal priorities ${priorities//$'\n'/ }, not 3 or 4"
    [ "$(in_container systemctl show -p ActiveState --value push-relay.service)" = active ] && [ "$(main_pid push-relay.service)" = "$pid" ] ||
        fail "systemd: after a refused reload push-relay.service is $(in_container systemctl show -p ActiveState -p MainPID push-relay.service | xargs), not active with MainPID $pid"
    in_container curl -sf "localhost:$port/ready" >/dev/null || fail "systemd: /ready failed after a refused reload"
    log "systemd: systemctl reload of a refused file: exit status non-zero; systemctl status shows $(grep -o 'Error: configuration reload refused.*' "$work/systemd-status.out" | head -1 | cut -c1-140)…; journal priorities ${priorities//$'\n'/ }; still serving"
    cp -p "$work/systemd-good.yaml" "$yaml"
    in_container systemctl reload push-relay.service >"$work/systemd-reload.out" 2>&1 ||
        fail "systemd: systemctl reload of the restored file failed: $(cat "$work/systemd-reload.out")"
    in_container curl -sf "localhost:$port/ready" >/dev/null || fail "systemd: /ready failed after reloading the restored file"
}

# systemd_upgrade PORT: an earlier build of the package (earlier_deb) installed over this one and
# running, then this build installed as docs/operations.md's "Upgrading the package" prints it: the
# unit restarts on this build (a new MainPID; /ready's version).
systemd_upgrade() {
    local port="$1" earlier reported before after line steps=0 block exe
    earlier=$(earlier_deb "$root/root/earlier") || fail "systemd: could not make an earlier build of $(basename "$deb")"
    reported=$earlier
    [ "$earlier" != "$version~0" ] || reported=$version
    before=$(main_pid push-relay.service)
    in_container sh -c "cd /root/earlier && apt-get install -y --allow-downgrades ./push-relay_${earlier}_$debarch.deb" >"$work/systemd-earlier.log" 2>&1 ||
        fail "systemd: installing the earlier build failed: $(tail -5 "$work/systemd-earlier.log")"
    wait_for "[ \"\$(ready_version $port)\" = '$reported' ]" 60 ||
        fail "systemd: the earlier build $earlier does not answer /ready: $(in_container curl -s "localhost:$port/ready")"
    [ "$(main_pid push-relay.service)" != "$before" ] || fail "systemd: installing the earlier build did not restart the unit"
    before=$(main_pid push-relay.service)
    block=$(doc_block docs/operations.md '### Upgrading the package') || fail "systemd: no sh block under '### Upgrading the package' in docs/operations.md"
    while IFS= read -r line <&3; do
        log "systemd: docs/operations.md: $line"
        case "$line" in
        'sha256sum -c SHA256SUMS --ignore-missing')
            (cd "$dist" && sha256sum -c SHA256SUMS --ignore-missing) >"$work/systemd-upgrade.log" 2>&1 || fail "systemd: $line: $(tail -5 "$work/systemd-upgrade.log")"
            ;;
        'apt-get install ./push-relay_*_amd64.deb')
            in_container sh -c "cd /root && $line" >>"$work/systemd-upgrade.log" 2>&1 || fail "systemd: $line: $(tail -20 "$work/systemd-upgrade.log")"
            ;;
        'push-relay --version')
            [[ "$(in_container sh -c "$line")" == "$version (commit "* ]] || fail "systemd: $line after the upgrade: $(in_container sh -c "$line")"
            ;;
        'curl -s localhost:8080/ready')
            wait_for "[ \"\$(ready_version $port)\" = '$version' ]" 60 ||
                fail "systemd: /ready after the upgrade answers $(in_container curl -s "localhost:$port/ready"), not version $version"
            ;;
        *) fail "systemd: docs/operations.md's 'Upgrading the package' block has a line this test does not know: $line" ;;
        esac
        steps=$((steps + 1))
    done 3<<<"$block"
    ((steps == 4)) || fail "systemd: docs/operations.md's 'Upgrading the package' block has $steps lines, not the 4 this test knows"
    after=$(main_pid push-relay.service)
    exe=$(in_container readlink "/proc/$after/exe")
    [ "$after" != "$before" ] && [ "$exe" = /usr/bin/push-relay ] ||
        fail "systemd: after the upgrade the unit's MainPID is $after (before: $before), running $exe"
    log "systemd: $earlier, then $version installed over it as docs/operations.md says: the unit restarted (MainPID $before, then $after), /ready's version $version"
}

test_systemd() {
    local root="$work/systemd-root" container=pr-test-systemd
    local started=$SECONDS packages
    packages=$(package_names "$(dpkg-deb -f "$deb" Depends)")
    log "systemd: $(basename "$deb") under systemd in podman (Debian 12 minbase + systemd, dbus, curl, $packages)"
    # The package's dependencies are there already, so that apt-get installs the .deb without
    # package lists (minbase has none). curl is for the doc's last line.
    debian_rootfs minbase "systemd systemd-sysv dbus curl $packages" "$root"
    cp "$deb" "$root/root/"
    podman_env
    containers+=("$container")
    podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
    podman run -d --name "$container" --systemd=always --cap-add all --network host --rootfs "$root" /sbin/init >/dev/null
    wait_for "podman exec $container systemctl is-system-running --wait" 60 ||
        fail "systemd: the container's systemd is not running: $(in_container systemctl is-system-running 2>&1) $(in_container systemctl --failed --no-legend 2>&1)"
    local sandbox_port relay_port instance_port
    sandbox_port=$(free_port)
    relay_port=$(free_port)
    instance_port=$(free_port)
    local output="$root/var/lib/push-relay/sandbox.out"
    # docs/operations.md's Install block, line by line as printed, in the container. The table is
    # every line this test knows, with what stands in for the operator's own parts: where the
    # artifacts were downloaded, the editor, the database, the port. A line it does not know fails
    # the test, so the doc and the test cannot drift apart.
    local block line steps=0 doc_url='postgresql://push_relay:PASSWORD@db.internal/push_relay'
    local install_log="$work/systemd-install.log"
    block=$(doc_block docs/operations.md '### Debian: the package') || fail "systemd: no sh block under '### Debian: the package' in docs/operations.md"
    while IFS= read -r line <&3; do
        log "systemd: docs/operations.md: $line"
        echo "# $line" >>"$install_log"
        case "$line" in
        'sha256sum -c SHA256SUMS --ignore-missing')
            (cd "$dist" && sha256sum -c SHA256SUMS --ignore-missing) >>"$install_log" 2>&1 || fail "systemd: $line: $(tail -5 "$install_log")"
            ;;
        'apt-get install ./push-relay_*_amd64.deb')
            # /root holds this build's .deb alone.
            in_container sh -c "cd /root && $line" >>"$install_log" 2>&1 || fail "systemd: $line: $(tail -20 "$install_log")"
            [ "$(in_container systemctl show -p LoadState --value push-relay.service)" = loaded ] || fail "systemd: push-relay.service is not loaded"
            ;;
        'editor /etc/push-relay/push-relay.yaml')
            # The apps of a sandbox run as the package's user (a transient unit; its printed
            # configuration in a file).
            in_container systemd-run -q --unit=pr-test-sandbox -p User=push-relay -p Group=push-relay \
                -p StandardOutput=file:/var/lib/push-relay/sandbox.out -p StandardError=journal \
                /usr/bin/push-relay sandbox --port "$sandbox_port" --directory /var/lib/push-relay/sandbox
            wait_for "sandbox_ready $output" 60 || fail "systemd: the sandbox printed no configuration: $(unit_journal pr-test-sandbox | tail -5)"
            relay_config "$relay_port" "$output" >"$root/etc/push-relay/push-relay.yaml"
            ;;
        "echo 'DATABASE_URL=$doc_url' >> /etc/push-relay/environment")
            in_container sh -c "${line/"$doc_url"/"$(database_url systemd)"}" >>"$install_log" 2>&1 || fail "systemd: $line: $(tail -5 "$install_log")"
            ;;
        'runuser -u push-relay -- push-relay config check --connect --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment')
            in_container sh -c "$line" >"$work/systemd-check.log" 2>&1 || fail "systemd: $line: $(tail -5 "$work/systemd-check.log")"
            grep '^database: ' "$work/systemd-check.log" | grep -q 'dbname=relay_systemd' ||
                fail "systemd: config check does not name the environment file's database: $(grep '^database' "$work/systemd-check.log")"
            grep -q '^database: connected' "$work/systemd-check.log" ||
                fail "systemd: config check --connect does not say it connected: $(grep '^database' "$work/systemd-check.log")"
            ;;
        'runuser -u push-relay -- push-relay keys create --admin --label ops --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment')
            in_container sh -c "$line" >"$work/systemd-key.out" 2>>"$install_log" || fail "systemd: $line: $(tail -5 "$install_log")"
            [[ "$(tail -1 "$work/systemd-key.out")" == prk_* ]] || fail "systemd: keys create printed no key on its last line: $(tail -2 "$work/systemd-key.out")"
            ;;
        'systemctl enable --now push-relay')
            in_container sh -c "$line" >>"$install_log" 2>&1 || fail "systemd: $line: $(unit_journal push-relay.service | tail -10)"
            ;;
        'curl -s localhost:8080/ready')
            # Once the relay has started.
            wait_for "podman exec $container sh -c '${line/localhost:8080/localhost:$relay_port}' | grep -q '\"status\":\"ready\"'" 60 ||
                fail "systemd: $line did not answer ready in 60 s: $(unit_journal push-relay.service | tail -10)"
            ;;
        *) fail "systemd: docs/operations.md's Install block has a line this test does not know: $line" ;;
        esac
        steps=$((steps + 1))
    done 3<<<"$block"
    ((steps == 8)) || fail "systemd: docs/operations.md's Install block has $steps lines, not the 8 this test knows"
    wait_for "podman exec $container push-relay health --ready --config /etc/push-relay/push-relay.yaml" 60 ||
        fail "systemd: push-relay health --ready failed: $(unit_journal push-relay.service | tail -10)"
    [ "$(stat -c %a "$root/var/lib/push-relay")" = 750 ] || fail "systemd: /var/lib/push-relay is mode $(stat -c %a "$root/var/lib/push-relay") once started"
    deliver "$relay_port" "$output" "$root/var/lib/push-relay/sandbox/sandbox-ca.pem" systemd
    local pid lines foreign
    pid=$(main_pid push-relay.service)
    systemd_reloads "$relay_port"
    # Nothing but PushRelay's own log lines from the relay's process since it started: no
    # libdispatch "Failed to set thread priority" at start, for one.
    lines=$(in_container journalctl _SYSTEMD_UNIT=push-relay.service "_PID=$pid" -o cat --no-pager)
    foreign=$(grep -Ev "$log_line" <<<"$lines" || true)
    [ -n "$lines" ] && [ -z "$foreign" ] || fail "systemd: the relay wrote lines that are not PushRelay's log lines: $(head -5 <<<"$foreign")"
    log "systemd: the relay's $(wc -l <<<"$lines") journal lines since it started are all PushRelay's log lines"
    systemd_upgrade "$relay_port"
    in_container systemctl stop push-relay.service
    # Result=success also covers a death by SIGTERM: the main process must have exited, with 0.
    local status
    status=$(in_container systemctl show -p Result -p ExecMainCode -p ExecMainStatus -p NRestarts push-relay.service | sort | xargs)
    [ "$status" = "ExecMainCode=1 ExecMainStatus=0 NRestarts=0 Result=success" ] ||
        fail "systemd: push-relay.service stopped with $status: $(unit_journal push-relay.service | tail -5)"
    # grep reads the whole journal (grep -q would stop at the first match, and journalctl, still
    # writing, would die of SIGPIPE: under pipefail, a failure).
    unit_journal push-relay.service | grep 'PushRelay stopped' >/dev/null || fail "systemd: no stop line in the journal"
    # The template, one instance on another port, as push-relay@PORT runs it.
    in_container systemctl enable -q --now "push-relay@$instance_port.service" ||
        fail "systemd: push-relay@$instance_port start failed: $(unit_journal "push-relay@$instance_port.service" | tail -10)"
    wait_for "curl -sf http://127.0.0.1:$instance_port/ready" 60 ||
        fail "systemd: push-relay@$instance_port: /ready did not answer 200 in 60 s: $(unit_journal "push-relay@$instance_port.service" | tail -10)"
    in_container systemctl reload "push-relay@$instance_port.service" >"$work/systemd-reload.out" 2>&1 ||
        fail "systemd: systemctl reload push-relay@$instance_port failed: $(cat "$work/systemd-reload.out")"
    in_container systemctl stop "push-relay@$instance_port.service"
    status=$(in_container systemctl show -p Result -p ExecMainCode -p ExecMainStatus "push-relay@$instance_port.service" | sort | xargs)
    [ "$status" = "ExecMainCode=1 ExecMainStatus=0 Result=success" ] || fail "systemd: push-relay@$instance_port stopped with $status"
    # Nothing refused by the sandboxing along the way (a blocked system call answers EPERM, errno 1).
    local refused
    refused=$(in_container journalctl -u 'push-relay*' -o cat --no-pager |
        grep -Ei 'not permitted|permission denied|read-only file system|bad system call|SIGSYS|errno=1\b' || true)
    [ -z "$refused" ] || fail "systemd: the journal shows refusals: $refused"
    log "systemd: installed and started as docs/operations.md says, ready, reloaded, upgraded and stopped with exit status 0; push-relay@$instance_port too"
    local unit rating ratings=""
    for unit in push-relay.service push-relay@.service; do
        rating=$(in_container systemd-analyze security --offline=true "/lib/systemd/system/$unit" 2>&1 |
            sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
        [ -n "$rating" ] || fail "systemd: systemd-analyze security gave no rating for $unit"
        awk -v rating="$rating" 'BEGIN { exit !(rating <= 2.5) }' || fail "systemd: systemd-analyze security rates $unit $rating (above 2.5)"
        ratings="$ratings $unit $rating;"
    done
    log "systemd: systemd-analyze security --offline=true:${ratings%;} (at most 2.5)"
    # A database that refuses the relay's role (this PostgreSQL trusts the roles it has, so an
    # unknown one is SQLSTATE 28000): exit status 78 at once, and no restart.
    echo "DATABASE_URL=postgresql://nobody@127.0.0.1:$pg_port/relay_systemd" >"$root/etc/push-relay/environment"
    refused_start "refused by the database" 'not retried.*role .nobody. does not exist'
    # What runbooks.md has the operator run then: config check --connect names the refusal (78);
    # a database that does not answer is exit status 1.
    local check="runuser -u push-relay -- push-relay config check --connect --config /etc/push-relay/push-relay.yaml --env-file /etc/push-relay/environment"
    status=0
    in_container sh -c "$check" >"$work/systemd-connect.log" 2>&1 || status=$?
    [ "$status" = 78 ] && grep -q 'role .nobody. does not exist' "$work/systemd-connect.log" ||
        fail "systemd: config check --connect with a refused role exited $status: $(tail -3 "$work/systemd-connect.log")"
    echo "DATABASE_URL=postgresql://postgres@127.0.0.1:$(free_port)/relay_systemd?connect_timeout=3" >"$root/etc/push-relay/environment"
    status=0
    in_container timeout 120 sh -c "$check" >"$work/systemd-connect.log" 2>&1 || status=$?
    [ "$status" = 1 ] || fail "systemd: config check --connect with no database listening exited $status, not 1: $(tail -3 "$work/systemd-connect.log")"
    log "systemd: config check --connect: 78 for the refused role, 1 for no database listening: $(grep -m1 '^Error' "$work/systemd-connect.log")"
    # No database at all: the environment file without DATABASE_URL; the unit's DATABASE_EMBEDDED=false
    # makes serve refuse at once, naming database.url, and create nothing.
    : >"$root/etc/push-relay/environment"
    refused_start "without DATABASE_URL" 'database\.url'
    [ ! -e "$root/var/lib/push-relay/.push-relay-data" ] || fail "systemd: without DATABASE_URL the relay created /var/lib/push-relay/.push-relay-data"
    log "systemd: $((SECONDS - started)) s"
    podman rm -f -t 0 "$container" >/dev/null
}

test_image() {
    podman_env
    log "image: $(basename "$archive") with podman (runc)"
    containers+=(pr-test-relay pr-test-sandbox)
    podman rm -f -t 0 pr-test-relay pr-test-sandbox >/dev/null 2>&1 || true
    # Named with the base version, the examples' tag; the build's version is its label.
    local image
    image="localhost/push-relay:$(base_of "$version")"
    podman rmi -f "$image" >/dev/null 2>&1 || true
    podman load -q -i "$archive" >/dev/null
    [ "$(podman image inspect -f '{{.Config.User}}' "$image")" = "10001:10001" ] || fail "image: not a non-root user"
    local label reported
    label=$(podman image inspect -f '{{index .Labels "org.opencontainers.image.version"}}' "$image")
    reported=$(podman run --rm "$image" --version)
    [ "$label" = "$version" ] && [[ "$reported" == "$version (commit "* ]] ||
        fail "image: $image is labelled version '$label' and reports '$reported', not $version"
    local licenses
    licenses=$(podman image inspect -f '{{index .Labels "org.opencontainers.image.licenses"}}' "$image")
    [ "$licenses" = Apache-2.0 ] || fail "image: label org.opencontainers.image.licenses is '$licenses', not Apache-2.0"
    local sandbox_dir="$work/image-sandbox" config_dir="$work/image-config"
    install -d -o 10001 -g 10001 "$sandbox_dir"
    install -d "$config_dir"
    local sandbox_port relay_port
    sandbox_port=$(free_port)
    relay_port=$(free_port)
    podman run -d --name pr-test-sandbox --network host --read-only -v "$sandbox_dir:/sandbox" "$image" \
        sandbox --port "$sandbox_port" --directory /sandbox >/dev/null
    wait_for "podman logs pr-test-sandbox 2>/dev/null >$work/image-sandbox.out; sandbox_ready $work/image-sandbox.out" 60 ||
        fail "image: the sandbox printed no configuration: $(podman logs pr-test-sandbox 2>&1 | tail -5)"
    podman logs pr-test-sandbox 2>/dev/null >"$work/image-sandbox.out"
    sandbox_config "$work/image-sandbox.out" >"$config_dir/push-relay.yaml"
    # A configuration the image's user (uid 10001) cannot read, as docs/operations.md warns: exit
    # status 78, naming the file.
    chmod 0600 "$config_dir/push-relay.yaml"
    local status=0
    podman run --rm --network host --read-only -e DATABASE_URL="$(database_url image)" \
        -v "$config_dir:/etc/push-relay:ro" "$image" >"$work/image-unreadable.log" 2>&1 || status=$?
    [ "$status" = 78 ] && grep -q 'push-relay\.yaml' "$work/image-unreadable.log" ||
        fail "image: a configuration file uid 10001 cannot read: exit status $status: $(tail -3 "$work/image-unreadable.log")"
    log "image: a configuration uid 10001 cannot read: exit status 78, $(grep -m1 'push-relay\.yaml' "$work/image-unreadable.log")"
    chmod 0644 "$config_dir/push-relay.yaml"
    # The file holds the apps; the listener and the database come from the environment.
    podman run -d --name pr-test-relay --network host --read-only --tmpfs /tmp \
        -e DATABASE_URL="$(database_url image)" -e HTTP_HOST=127.0.0.1 -e HTTP_PORT="$relay_port" -e LOG_FORMAT=json \
        -v "$config_dir:/etc/push-relay:ro" -v "$sandbox_dir:/sandbox:ro" "$image" >/dev/null
    wait_for "podman exec pr-test-relay push-relay health --ready" 60 ||
        fail "image: push-relay health --ready failed: $(podman logs pr-test-relay 2>&1 | tail -5)"
    podman exec pr-test-relay push-relay health >/dev/null || fail "image: push-relay health"
    [ "$(podman exec pr-test-relay id -u)" = 10001 ] || fail "image: the relay does not run as uid 10001"
    [ "$(podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' pr-test-relay)" = true ] || fail "image: the root filesystem is writable"
    if podman exec pr-test-relay sh -c 'echo x > /var/lib/push-relay/x' 2>/dev/null; then fail "image: wrote to the root filesystem"; fi
    deliver "$relay_port" "$work/image-sandbox.out" "$sandbox_dir/sandbox-ca.pem" image
    local started=$SECONDS
    podman stop -t 60 pr-test-relay >/dev/null
    local code
    code=$(podman inspect -f '{{.State.ExitCode}}' pr-test-relay)
    [ "$code" = 0 ] || fail "image: exit code $code after SIGTERM: $(podman logs pr-test-relay 2>&1 | tail -5)"
    podman logs pr-test-relay 2>&1 | grep '"PushRelay stopped"' >/dev/null || fail "image: no stop line in the log: $(podman logs pr-test-relay 2>&1 | tail -3)"
    log "image: runs as uid 10001 on a read-only root filesystem; stopped on SIGTERM in $((SECONDS - started)) s with exit code 0"
    log "image: $(podman image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1 / 1e6}') unpacked, archive $(du -h "$archive" | cut -f1)"
    podman rm -f -t 0 pr-test-relay pr-test-sandbox >/dev/null
}

# PushRelayKit for Android's artifacts, read back without build.sh: what an app's build and Maven
# will take from them. The library's and tests' classes are named from Clients/PushRelayKitAndroid/src.
# Their presence and SHA256SUMS are checked above.
test_android() {
    log "android: $(basename "$android").aar, .jar and .pom"
    mkdir -p "$work/android"
    if ! python3 - "$android" "$version" Clients/PushRelayKitAndroid/src "$work/android/classes.jar" >"$work/android-contents.out" <<'EOF'; then
import pathlib, sys, zipfile
import xml.etree.ElementTree as ElementTree

base, version, src, classes_out = sys.argv[1:5]
name = pathlib.Path(base).name
artifact_id = name[: -len("-" + version)]
problems = []
ANDROID = "{http://schemas.android.com/apk/res/android}"


def listed(items, most=6):
    items = sorted(items)
    return " ".join(items[:most]) + (" and %d more" % (len(items) - most) if len(items) > most else "")


def sources(kind):
    """The top-level class files, io/pushrelay/kit/Name.class, of src/KIND/java's sources."""
    root = pathlib.Path(src, kind, "java")
    return {str(p.relative_to(root).with_suffix(".class")) for p in root.rglob("*.java")}


library, tests = sources("main"), sources("test") | sources("example")


def classes(label, archive):
    """Checks a jar's entries; returns {class entry: CRC}."""
    found, outside, test, old = {}, [], [], []
    for info in archive.infolist():
        entry = info.filename
        if info.is_dir() and ("io/pushrelay/kit/".startswith(entry) or entry.startswith("io/pushrelay/kit/")):
            continue  # the folders, if the jar has entries for them
        if not entry.startswith("io/pushrelay/kit/") or not entry.endswith(".class"):
            outside.append(entry)
            continue
        outer = entry.split("$")[0].removesuffix(".class") + ".class"
        simple = outer.rsplit("/", 1)[1][: -len(".class")]
        if outer in tests or simple.endswith(("Test", "Tests")) or "/example/" in entry:
            test.append(entry)
        data = archive.read(info)
        if data[:4] != b"\xca\xfe\xba\xbe" or data[6:8] != b"\x00\x33":
            old.append("%s (%s)" % (entry, int.from_bytes(data[6:8], "big") if data[:4] == b"\xca\xfe\xba\xbe" else "not a class file"))
        found[entry] = info.CRC
    if outside:
        problems.append("%s holds entries that are not io/pushrelay/kit/ classes: %s" % (label, listed(outside)))
    if test:
        problems.append("%s holds test or example classes: %s" % (label, listed(test)))
    if old:
        problems.append("%s holds classes whose major version is not 51 (Java 7): %s" % (label, listed(old)))
    missing = library - set(found)
    if missing:
        problems.append("%s lacks classes of src/main/java: %s" % (label, listed(missing)))
    return found


# The .aar: exactly its four entries; the manifest; classes.jar.
in_aar = {}
try:
    aar = zipfile.ZipFile(base + ".aar")
    entries = [info.filename for info in aar.infolist()]
    expected = ["AndroidManifest.xml", "R.txt", "classes.jar", "proguard.txt"]
    if sorted(entries) != expected:
        problems.append("the .aar holds %s, not exactly %s" % (" ".join(sorted(entries)) or "nothing", " ".join(expected)))
    if "AndroidManifest.xml" in entries:
        try:
            manifest = ElementTree.fromstring(aar.read("AndroidManifest.xml"))
            package = manifest.get("package")
            min_sdk = [e.get(ANDROID + "minSdkVersion") for e in manifest.findall("uses-sdk")]
            permissions = [e.get(ANDROID + "name") for e in manifest.findall("uses-permission")]
            if manifest.tag != "manifest" or package != "io.pushrelay.kit":
                problems.append("AndroidManifest.xml: <%s package=%r>, not <manifest package='io.pushrelay.kit'>" % (manifest.tag, package))
            if min_sdk != ["21"]:
                problems.append("AndroidManifest.xml: <uses-sdk android:minSdkVersion> is %s, not 21" % (" ".join(map(str, min_sdk)) or "missing"))
            if "android.permission.INTERNET" not in permissions:
                problems.append("AndroidManifest.xml: no <uses-permission android:name='android.permission.INTERNET'> (it has %s)"
                                % (" ".join(map(str, permissions)) or "none"))
        except ElementTree.ParseError as error:
            problems.append("AndroidManifest.xml is not well-formed XML: %s" % error)
    if "classes.jar" in entries:
        data = aar.read("classes.jar")
        pathlib.Path(classes_out).write_bytes(data)
        try:
            in_aar = classes("the .aar's classes.jar", zipfile.ZipFile(classes_out))
        except zipfile.BadZipFile as error:
            problems.append("the .aar's classes.jar is not a zip file: %s" % error)
except zipfile.BadZipFile as error:
    problems.append("the .aar is not a zip file: %s" % error)

# The .jar: the same classes, the same bytes.
try:
    in_jar = classes("the .jar", zipfile.ZipFile(base + ".jar"))
    if in_aar and set(in_jar) != set(in_aar):
        problems.append("the .jar and the .aar's classes.jar hold different classes: only in the .jar: %s; only in classes.jar: %s"
                        % (listed(set(in_jar) - set(in_aar)) or "none", listed(set(in_aar) - set(in_jar)) or "none"))
    elif in_aar and in_jar != in_aar:
        problems.append("the .jar's classes differ from classes.jar's: %s" % listed(e for e in in_jar if in_jar[e] != in_aar[e]))
except zipfile.BadZipFile as error:
    problems.append("the .jar is not a zip file: %s" % error)

# The POM: the file name's coordinates, nothing an app's build would have to fetch.
try:
    project = ElementTree.parse(base + ".pom").getroot()
    local = lambda element: element.tag.rsplit("}", 1)[-1]
    fields = {local(e): (e.text or "").strip() for e in project}
    for field, value in (("groupId", "io.pushrelay"), ("artifactId", artifact_id), ("version", version), ("packaging", "aar")):
        if fields.get(field) != value:
            problems.append("the .pom's <%s> is %r, not %r" % (field, fields.get(field), value))
    if any(local(e) == "dependencies" for e in project.iter()):
        problems.append("the .pom has <dependencies> (the library has none)")
except ElementTree.ParseError as error:
    problems.append("the .pom is not well-formed XML: %s" % error)

if problems:
    print("; ".join(problems))
    sys.exit(1)
print("%d classes of class version 51 in the .aar's classes.jar and in the .jar (the same bytes), io.pushrelay.kit's alone; "
      "manifest io.pushrelay.kit, minSdkVersion 21, INTERNET; POM io.pushrelay:%s:%s, no dependencies" % (len(in_aar), artifact_id, version))
EOF
        fail "android: $(cat "$work/android-contents.out")"
    fi
    log "android: $(cat "$work/android-contents.out")"
    # dx and dexdump as build.sh runs them (dx 1.11 from its cache in .build-android/tools, fetched
    # if missing), and the API check, on the classes.jar an app's build will dex.
    Clients/PushRelayKitAndroid/build.sh --tools-only >"$work/android-tools.log" 2>&1 ||
        fail "android: Clients/PushRelayKitAndroid/build.sh --tools-only (dx, dexdump, the API stubs): $(tail -5 "$work/android-tools.log")"
    java -cp .build-android/tools/dx/usr/share/java/com.android.tools.build.builder-2.2.2.jar:/usr/share/java/guava.jar \
        com.android.dx.command.Main --dex --output="$work/android/classes.dex" "$work/android/classes.jar" >"$work/android-dx.log" 2>&1 ||
        fail "android: dx refused the .aar's classes.jar: $(grep -vE '^\s+(at |\.\.\. [0-9]+ more)' "$work/android-dx.log" | tail -5)"
    dexdump -c "$work/android/classes.dex" >"$work/android-dexdump.log" 2>&1 && grep -q "Checksum verified" "$work/android-dexdump.log" ||
        fail "android: dexdump -c refused the classes.dex dx made: $(tail -5 "$work/android-dexdump.log")"
    python3 Clients/PushRelayKitAndroid/tools/api-check.py --cache .build-android/tools/api-surface.json "$work/android/classes.jar" \
        >"$work/android-api-check.log" 2>&1 ||
        fail "android: tools/api-check.py refused the .aar's classes.jar: $(tail -6 "$work/android-api-check.log")"
    log "android: dx and dexdump -c: classes.dex $(stat -c %s "$work/android/classes.dex") bytes, checksum verified"
    log "android: $(tail -1 "$work/android-api-check.log")"
}

for part in tarball deb systemd image; do
    if [ -z "$only" ] || [ "$only" = "$part" ]; then "test_$part"; fi
done
if [ -z "$only" ] || [ "$only" = examples ]; then
    binary="$work/examples-bin/push-relay"
    mkdir -p "$(dirname "$binary")"
    tar -xOzf "$tarball" --wildcards '*/bin/push-relay' >"$binary" && chmod 0755 "$binary"
    EXAMPLES_CHECK_BINARY="$binary" Deploy/examples-check.sh
fi
if [ -z "$only" ] || [ "$only" = android ]; then test_android; fi
log "all artifact tests passed"
