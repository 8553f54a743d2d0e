#!/usr/bin/env bash
# scripts/test.sh's second lane, beside its builds and suites: the release build (Deploy/release.sh
# into .build-release/dist; log .build-release/release-build.log), then the artifact tests
# (Deploy/test.sh), which start as soon as the release build and the debug build (the tarball's
# part runs PushRelayKit's debug example) are both done, while the suites may still run.
# scripts/test.sh touches .build-release/debug-built when its debug build is done.
# Each part's output goes to .build-release/artifacts-PART.log; one line per step (its name for the
# stage table, seconds and exit status, tab-separated) to .build-release/release-lane-stages, read
# by scripts/test.sh.
# Then scripts/test/android-client.sh (log .build-release/android-client.log) beside the parts.
# Exits non-zero when any step failed.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. Deploy/lib.sh

stages=.build-release/release-lane-stages
debug_built=.build-release/debug-built
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$stages"; }
# scripts/test.sh kills this lane's process group when it exits; should it die unable to (SIGKILL),
# this watch ends the group (the release build, the parts) within a second.
parent=$PPID
(while kill -0 "$parent" 2>/dev/null; do sleep 1; done; kill -- "-$$") &
watch=$!
trap 'kill "$watch" 2>/dev/null || true' EXIT

start=$SECONDS status=0
Deploy/release.sh --out .build-release/dist >.build-release/release-build.log 2>&1 &
release=$!
# The Debian root filesystems of the image and the artifact tests, made beside the builds (mostly
# downloads and unpacking) rather than after the release build, on the run's longest path; from
# the debug binary's libraries, which are the release binary's. A root guessed wrong is made by
# the part that needs it, as before. A lock per root: release.sh waits for the image's.
until [ -e "$debug_built" ]; do
    kill -0 "$release" 2>/dev/null || break
    sleep 1
done
warm=""
if [ -e "$debug_built" ]; then
    (warm_rootfs .build/debug/push-relay >.build-release/warm-rootfs.log 2>&1) &
    warm=$!
fi
wait "$release" || status=$?
note "release build (beside the others)" $((SECONDS - start)) "$status"
((status == 0)) || exit "$status"
if [ -n "$warm" ]; then
    wait "$warm" || log "making the root filesystems ahead failed (each part makes its own): $(tail -n 3 .build-release/warm-rootfs.log)"
fi
# The tarball's part runs the debug example; scripts/test.sh stops this lane if its build fails.
until [ -e "$debug_built" ]; do sleep 1; done

# Two lanes: each part keeps about one core busy (a chroot's or a container's relay and sandbox,
# a booting systemd; android, the Android library's files read back and dexed, a few seconds).
# Deploy/test.sh runs of different parts share no container, port, directory or log.
lane() {
    local part begun code failed=0
    for part in "$@"; do
        begun=$SECONDS code=0
        PUSH_RELAY_KIT_EXAMPLE=.build/debug/push-relay-kit-example \
            Deploy/test.sh --dist .build-release/dist --only "$part" >".build-release/artifacts-$part.log" 2>&1 || code=$?
        note "artifacts: $part" $((SECONDS - begun)) "$code"
        ((code == 0)) || failed=1
    done
    return "$failed"
}
# Beside them, PushRelayKit for Android against the debug relay (its own sandbox and embedded
# PostgreSQL), testing the library as released: mostly waiting on the relay and the JVM, it uses
# this lane's slack rather than adding a stage to the suites' lane. Its log ends with the line
# "PushRelayKit for Android: N passed, N failed", which scripts/test.sh prints.
android_client() {
    local begun=$SECONDS code=0
    ANDROID_CLIENT_DIST=.build-release/dist scripts/test/android-client.sh >.build-release/android-client.log 2>&1 || code=$?
    note "PushRelayKit for Android (beside)" $((SECONDS - begun)) "$code"
    return "$code"
}
begun=$SECONDS
lane tarball image examples &
first=$!
lane deb systemd android &
second=$!
android_client &
third=$!
wait "$first" || status=1
wait "$second" || status=1
wait "$third" || status=1
note "artifact tests (two lanes)" $((SECONDS - begun)) "$status"
exit "$status"
