#!/usr/bin/env bash
# Installs the system packages PushRelay builds and runs against, on Debian or Ubuntu.
# Safe to run repeatedly: it installs only what is missing. Needs root or sudo when something is.
set -euo pipefail

packages=(
    libcurl4-openssl-dev   # HTTP/2 client to APNs and FCM (nghttp2 inside)
    libpq-dev              # PostgreSQL client library
    libssl-dev             # TLS under libcurl
    pkg-config             # lets SwiftPM find the two libraries above
    postgresql             # initdb and pg_ctl for the embedded cluster and the tests
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

if ! command -v swift >/dev/null 2>&1; then
    echo "bootstrap: the Swift 6 toolchain is not on PATH (expected at /opt/swift/usr/bin)" >&2
    exit 1
fi
