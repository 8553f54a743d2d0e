#!/usr/bin/env bash
# One command from a fresh clone to the whole test suite: checks the room table in
# docs/architecture.md, the main module's sizes (scripts/sizes.py) and the code's formatting,
# installs missing system packages, builds, and runs every test against real PostgreSQL servers
# that the tests start themselves, then the API and browser tests, then builds the release
# artifacts and tests them by running them.
# Extra arguments go to `swift test` alone (for example --filter PostgresTests).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# stage NAME COMMAND…: runs COMMAND and notes its seconds; the table of stages is printed at the
# end, also when one fails, so a slow stage is seen the day it appears.
stages=()
# note_stage NAME SECONDS STATUS: one line of the table.
note_stage() { stages+=("$(printf '%-38s %5d s' "$1" "$2")$( (($3 == 0)) || echo "  FAILED (exit status $3)")"); }
stage() {
    local name="$1" start=$SECONDS status=0
    shift
    "$@" || status=$?
    note_stage "$name" $((SECONDS - start)) "$status"
    return "$status"
}
print_stages() {
    ((${#stages[@]})) || return 0
    log "stages:"
    printf '    %s\n' "${stages[@]}" "$(printf '%-38s %5d s' total "$SECONDS")" >&2
}
trap print_stages EXIT

python3 scripts/rooms.py --check docs/architecture.md  # cheap: before the build
python3 scripts/sizes.py --check >/dev/null || python3 scripts/sizes.py --check  # within the limits it names
# Formatting (.swift-format: 4 spaces, 150 columns); `swift format -i -r Sources Tests Plugins Package.swift` fixes it.
swift format lint --strict --recursive --parallel Sources Tests Plugins Package.swift Clients
scripts/line-length.py  # the same 150 columns for the string literals and comments swift-format leaves alone
stage "bootstrap (system packages)" scripts/bootstrap.sh
# What the later stages install for themselves when run alone (the console test's Chromium, the
# release and artifact tools), in one apt transaction now: the release build runs beside the other
# stages, and two apt-gets at once would fail on apt's lock.
stage "system packages of the later stages" apt_install_missing chromium chromium-driver dpkg-dev binutils mmdebstrap podman runc uidmap
if [ "$#" -eq 0 ]; then
    # The release build and then the artifact tests need none of the suites' results: they run
    # beside the debug build and the suites, as scripts/test/release-lane.sh (their output in
    # .build-release/release-build.log and artifacts-PART.log). Two lanes keep both cores busy
    # through each one's serial stretches (the last modules, the link); the suites are checked to
    # pass with both cores busy (scripts/test/stress.sh). It writes nothing in the source tree.
    mkdir -p .build-release
    rm -f .build-release/debug-built .build-release/release-lane-stages
    setsid scripts/test/release-lane.sh &
    lane_pid=$!  # its own process group (setsid), so a failed run stops the whole lane
    trap 'kill -- "-$lane_pid" 2>/dev/null || true; print_stages' EXIT
    log "release build and artifact tests started (pid $lane_pid, log .build-release/release-build.log)"
    # Waits for the lane; prints the parts' output and adds its steps to the stage table.
    wait_release_lane() {
        local status=0 name seconds code
        wait "$lane_pid" || status=$?
        while IFS=$'\t' read -r name seconds code; do
            case "$name" in
            "release build"*)
                if ((code != 0)); then
                    log "the release build failed (exit status $code); the end of .build-release/release-build.log:"
                    tail -n 40 .build-release/release-build.log >&2
                fi
                ;;
            "artifacts: "*) sed "s/^/[${name#artifacts: }] /" ".build-release/artifacts-${name#artifacts: }.log" >&2 ;;
            "PushRelayKit for Android"*)
                # Its whole log when it failed, else its steps' seconds and its count line.
                if ((code != 0)); then
                    sed 's/^/[android] /' .build-release/android-client.log >&2
                else
                    grep -E '^(android-client.sh: |PushRelayKit for Android: )' .build-release/android-client.log | sed 's/^/[android] /' >&2
                fi
                ;;
            esac
            note_stage "$name" "$seconds" "$code"
        done <.build-release/release-lane-stages
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
# It also gives each batch a temporary directory (TMPDIR) and removes it afterwards; checked here.
# shellcheck disable=SC2016  # the inner shell expands TMPDIR
batch_tmp=$(scripts/test/reap.py -- sh -c ': "${TMPDIR:?reap.py set no TMPDIR}"; touch "$TMPDIR/key" && echo "$TMPDIR"')
[ ! -e "$batch_tmp" ] || { log "scripts/test/reap.py left the batch's temporary directory $batch_tmp behind"; exit 1; }
if [ "$#" -gt 0 ]; then
    "${reap[@]}" swift test "$@"
    exit
fi
touch .build-release/debug-built  # the release lane's artifact tests may start (they run the debug example)
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
stage "waiting for the release lane" wait_release_lane
