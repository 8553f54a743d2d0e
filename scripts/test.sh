#!/usr/bin/env bash
# One command from a fresh clone to the whole test suite: checks the room table in
# docs/architecture.md and the code's formatting, installs missing system packages, builds, and
# runs every test against real PostgreSQL servers that the tests start themselves, then the API
# and browser tests, then builds the release artifacts and tests them by running them.
# Extra arguments go to `swift test` alone (for example --filter PostgresTests).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# stage NAME COMMAND…: runs COMMAND and notes its seconds; the table of stages is printed at the
# end, also when one fails, so a slow stage is seen the day it appears.
stages=()
stage() {
    local name="$1" start=$SECONDS status=0
    shift
    "$@" || status=$?
    stages+=("$(printf '%-38s %5d s' "$name" $((SECONDS - start)))$( ((status == 0)) || echo "  FAILED (exit status $status)")")
    return "$status"
}
print_stages() {
    ((${#stages[@]})) || return 0
    log "stages:"
    printf '    %s\n' "${stages[@]}" "$(printf '%-38s %5d s' total "$SECONDS")" >&2
}
trap print_stages EXIT

python3 scripts/rooms.py --check docs/architecture.md  # cheap: before the build
# Formatting (.swift-format: 4 spaces, 150 columns); `swift format -i -r Sources Tests Plugins Package.swift` fixes it.
swift format lint --strict --recursive --parallel Sources Tests Plugins Package.swift Clients
scripts/line-length.py  # the same 150 columns for the string literals and comments swift-format leaves alone
stage "bootstrap (system packages)" scripts/bootstrap.sh
# What the later stages install for themselves when run alone (the console test's Chromium, the
# release and artifact tools), in one apt transaction now: the release build runs beside the other
# stages, and two apt-gets at once would fail on apt's lock.
stage "system packages of the later stages" apt_install_missing chromium chromium-driver dpkg-dev binutils mmdebstrap podman runc uidmap
if [ "$#" -eq 0 ]; then
    # The release build needs none of the tests' results: it runs beside the debug build and the tests
    # (its output in its log) and the artifact tests wait for it. Two builds at once keep both cores
    # busy through each one's serial stretches (the last modules, the link); the suites are checked to
    # pass with both cores busy (scripts/test/stress.sh). It writes nothing in the source tree.
    mkdir -p .build-release
    release_log=.build-release/release-build.log
    release_started=$SECONDS
    setsid Deploy/release.sh --out .build-release/dist >"$release_log" 2>&1 &
    release_pid=$!  # its own process group (setsid), so a failed run stops the whole build
    stop_release() { kill -- "-$release_pid" 2>/dev/null || true; }
    trap 'stop_release; print_stages' EXIT
    log "release build started (pid $release_pid, log $release_log)"
    wait_release() {
        local status=0
        wait "$release_pid" || status=$?
        stages+=("$(printf '%-38s %5d s' "release build (beside the others)" $((SECONDS - release_started)))")
        if ((status != 0)); then
            log "the release build failed (exit status $status); the end of $release_log:"
            tail -n 40 "$release_log" >&2
        fi
        return "$status"
    }
fi
stage "debug build with tests" swift build --build-tests
# Free space where the build and the test clusters live, for reading a failed run.
df -h . /dev/shm 2>/dev/null | sed "s/^/$script_name: /" >&2 || true
# Each batch runs under scripts/test/reap.py: a batch that hangs past its ceiling (a bound on a
# hang, far above its usual minutes) is killed and fails, and one that leaves a process behind (a
# relay, a PostgreSQL server of a crashed test process) fails, with the processes named.
reap=(scripts/test/reap.py --timeout 1200 --)
if [ "$#" -gt 0 ]; then
    "${reap[@]}" swift test "$@"
    exit
fi
# The Debian root filesystems of the release build's image and the artifact tests, made beside the
# suites (mmdebstrap: mostly downloads and unpacking) rather than after the release build, where
# they were on the run's longest path. From the debug binary's libraries, which are the release
# binary's; a root it guesses wrong is made by the part that needs it, as before.
setsid bash -c '. scripts/lib.sh && . Deploy/lib.sh && warm_rootfs .build/debug/push-relay' >.build-release/warm-rootfs.log 2>&1 &
warm_pid=$!
trap 'stop_release; kill -- "-$warm_pid" 2>/dev/null || true; print_stages' EXIT
# The suites that run several relay processes on one database (scale-out, failover) keep both cores
# busy for a minute or more, and PushRelayKit's suite runs relay processes and the example binary:
# each batch on its own, so the three do not add up to more processes than the machine holds.
# --skip-build: built just above.
cluster_suites='ScaleOutTests|FailoverTests'
client_suite='PushRelayKitRelayTests'
stage "swift test: main batch" "${reap[@]}" swift test --skip-build --skip "$cluster_suites|$client_suite"
stage "swift test: scale-out, failover" "${reap[@]}" swift test --skip-build --filter "$cluster_suites"
stage "swift test: PushRelayKit with relays" "${reap[@]}" swift test --skip-build --filter "$client_suite"
stage "schemathesis" scripts/test/schemathesis.sh             # the served OpenAPI document vs the server
stage "PushRelayKit package" scripts/test/client-package.sh   # PushRelayKit on its own, as an app adds it (swift-crypto on Linux only)
stage "console in Chromium" scripts/test/console-test.sh      # the operator console in headless Chromium (screenshots in .build/console-test)
# The release artifacts (tarball, .deb, OCI image) built, then each run; the deployment examples.
stage "waiting for the release build" wait_release
wait "$warm_pid" || log "making the artifact tests' root filesystems ahead failed (each part makes its own): $(tail -n 5 .build-release/warm-rootfs.log)"
# In two lanes side by side: each part keeps about one core busy (mmdebstrap and dpkg making its
# Debian root filesystem, a booting systemd, the relay). Deploy/test.sh runs of different parts
# share no container, port, directory or log. Each part's output is printed when its lane is done.
artifact_lane() {
    local part start status failed=0
    for part in "$@"; do
        start=$SECONDS status=0
        Deploy/test.sh --dist .build-release/dist --only "$part" >".build-release/artifacts-$part.log" 2>&1 || status=$?
        echo "$part $((SECONDS - start)) $status" >>.build-release/artifact-stages
        ((status == 0)) || failed=1
    done
    return "$failed"
}
artifact_tests() {
    local lanes=() lane status=0 part seconds code
    rm -f .build-release/artifact-stages
    artifact_lane tarball image examples &
    lanes+=($!)
    artifact_lane deb systemd &
    lanes+=($!)
    for lane in "${lanes[@]}"; do wait "$lane" || status=1; done
    while read -r part seconds code; do
        sed "s/^/[$part] /" ".build-release/artifacts-$part.log" >&2
        stages+=("$(printf '%-38s %5d s' "artifacts: $part" "$seconds")$( ((code == 0)) || echo "  FAILED (exit status $code)")")
    done <.build-release/artifact-stages
    return "$status"
}
stage "artifacts (two lanes)" artifact_tests
