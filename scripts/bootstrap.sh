#!/usr/bin/env bash
# Installs the system packages PushRelay builds and runs against, on Debian or Ubuntu.
# Safe to run repeatedly: it installs only what is missing. Needs root or sudo when something is.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

packages=(
    libcurl4-openssl-dev   # HTTP/2 client to APNs and FCM (nghttp2 inside)
    libpq-dev              # PostgreSQL client library
    libssl-dev             # TLS under libcurl
    libjemalloc-dev        # the allocator push-relay is linked with
    pkg-config             # lets SwiftPM find the libraries above
    postgresql             # initdb and pg_ctl for the embedded cluster and the tests
    curl                   # the scripts wait for /ready and set up test data over HTTP
)
apt_install_missing "${packages[@]}"

# The Debian archive this machine's apt sources use for bookworm's main component, as apt itself
# reads them (one-line and deb822 files alike), so that the backports source added below follows a
# local mirror or proxy; empty when apt knows none (its lists not downloaded yet).
debian_archive() { apt-cache policy 2>/dev/null | awk '$3 == "bookworm/main" && $NF == "Packages" { print $2; exit }'; }

# libcurl 7.88 (Debian 12) resets every finished HTTP/2 stream and spends about twice the CPU per
# request of libcurl 8; Debian 12's backports carry libcurl 8.14. Upgrade to it unless
# PUSH_RELAY_SYSTEM_CURL=1; if that fails, PushRelay still works with 7.88.
curl_version=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null || true)
if [[ "${PUSH_RELAY_SYSTEM_CURL:-0}" != 1 && "$curl_version" == 7.* ]] && grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release; then
    backports_added=""
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        mirror=$(debian_archive)
        if [ -n "$mirror" ]; then
            log "adding Debian's bookworm-backports for libcurl 8, from $(sed -E 's|//[^/@]*@|//…@|' <<<"$mirror") (the apt sources' bookworm archive)"
        else
            mirror=http://deb.debian.org/debian
            log "adding Debian's bookworm-backports for libcurl 8, from $mirror (no bookworm main archive found in the apt sources)"
        fi
        backports_added=/etc/apt/sources.list.d/push-relay-backports.sources
        printf '%s\n' 'Types: deb' "URIs: $mirror" 'Suites: bookworm-backports' 'Components: main' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | as_root tee "$backports_added" >/dev/null
    fi
    upgrade=(libcurl4-openssl-dev/bookworm-backports libcurl4/bookworm-backports)
    # The curl command depends on its own libcurl version: upgrade it along, or apt removes it.
    if installed curl; then upgrade+=(curl/bookworm-backports); fi
    log "upgrading libcurl ${curl_version} to bookworm-backports"
    if ! { as_root apt-get update -qq && apt_install "${upgrade[@]}"; }; then
        log "warning: libcurl stays at ${curl_version} (backports not reachable); delivery works, with more CPU per push"
        # A source that does not answer (a local mirror without backports) would fail every later
        # apt-get update: take away the one just added; the next run tries again.
        if [ -n "$backports_added" ]; then
            log "removing $backports_added"
            as_root rm -f "$backports_added"
        fi
    fi
fi

if ! command -v swift >/dev/null 2>&1; then
    log "the Swift 6 toolchain is not on PATH (expected at /opt/swift/usr/bin)"
    exit 1
fi
