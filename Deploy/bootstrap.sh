#!/usr/bin/env bash
# Installs the system packages PushRelay builds and runs against, on Debian or Ubuntu.
# Safe to run repeatedly: it installs only what is missing. Needs root or sudo when something is.
set -euo pipefail

packages=(
    libcurl4-openssl-dev   # HTTP/2 client to APNs and FCM (nghttp2 inside)
    libpq-dev              # PostgreSQL client library
    libssl-dev             # TLS under libcurl
    libjemalloc-dev        # the allocator push-relay is linked with
    pkg-config             # lets SwiftPM find the libraries above
    postgresql             # initdb and pg_ctl for the embedded cluster and the tests
    curl                   # Deploy/schemathesis.sh sets up its test data over HTTP
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if ((${#missing[@]})); then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "bootstrap: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# libcurl 7.88 (Debian 12) resets every finished HTTP/2 stream and spends about twice the CPU per
# request of libcurl 8; Debian 12's backports carry libcurl 8.14. Upgrade to it unless
# PUSH_RELAY_SYSTEM_CURL=1; if that fails, PushRelay still works with 7.88.
curl_version=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null || true)
if [[ "${PUSH_RELAY_SYSTEM_CURL:-0}" != 1 && "$curl_version" == 7.* ]] && grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "bootstrap: adding Debian's bookworm-backports for libcurl 8" >&2
        printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' 'Components: main' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $sudo tee /etc/apt/sources.list.d/push-relay-backports.sources >/dev/null
    fi
    upgrade=(libcurl4-openssl-dev/bookworm-backports libcurl4/bookworm-backports)
    # The curl command depends on its own libcurl version: upgrade it along, or apt removes it.
    if dpkg-query -W -f='${Status}' curl 2>/dev/null | grep -q "install ok installed"; then upgrade+=(curl/bookworm-backports); fi
    echo "bootstrap: upgrading libcurl ${curl_version} to bookworm-backports" >&2
    if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${upgrade[@]}" >/dev/null; }; then
        echo "bootstrap: warning: libcurl stays at ${curl_version} (backports not reachable); delivery works, with more CPU per push" >&2
    fi
fi

if ! command -v swift >/dev/null 2>&1; then
    echo "bootstrap: the Swift 6 toolchain is not on PATH (expected at /opt/swift/usr/bin)" >&2
    exit 1
fi
