# Sourced by Deploy/release.sh and Deploy/test.sh (after scripts/lib.sh): Debian root filesystems
# made with mmdebstrap from Debian 12's own mirror, and podman set up for these machines.
# shellcheck shell=bash

# Debian 12 as a fresh install has it: the main archive, its updates and security updates.
debian_sources=(
    "deb http://deb.debian.org/debian bookworm main"
    "deb http://deb.debian.org/debian bookworm-updates main"
    "deb http://deb.debian.org/debian-security bookworm-security main"
)

# The base version: PushRelayVersion.current in Sources/PushRelay/App/PushRelayVersion.swift, the
# tag the examples' images use (localhost/push-relay:BASE).
base_version() {
    sed -n 's/.*static let current = "\(.*\)".*/\1/p' Sources/PushRelay/App/PushRelayVersion.swift
}

# Whether what a build compiles differs from HEAD (untracked files included).
sources_modified() { [ -n "$(git status --porcelain -- Sources Package.swift Migrations Plugins)" ]; }

# The commit a build is made from, as --version prints it: HEAD's 12 first hex digits, and
# "_modified" when the sources differ from it.
release_commit() {
    local commit
    commit=$(git rev-parse HEAD | cut -c1-12)
    if sources_modified; then echo "${commit}_modified"; else echo "$commit"; fi
}

# The version of a build of this tree, compiled in by release.sh and in its artifacts' names: the
# base version for a build of the tag v<base>; else <base>.<HEAD's commit time, UTC,
# YYYYMMDDHHMMSS>.g<12 hex digits of HEAD>, with the time of the build instead and ".modified"
# appended when the sources differ from HEAD. Digits, letters and dots only: a Debian version (dpkg
# orders two builds of one base by time, each after the release <base> itself), an OCI tag and
# a file name. base_of VERSION gives the base back.
release_version() {
    local base stamp
    base=$(base_version)
    [ -n "$base" ] || return 1
    if sources_modified; then
        stamp=$(date -u +%Y%m%d%H%M%S)
        echo "$base.$stamp.g$(git rev-parse HEAD | cut -c1-12).modified"
    elif git tag --points-at HEAD | grep -qxF "v$base"; then
        echo "$base"
    else
        stamp=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
        echo "$base.$stamp.g$(git rev-parse HEAD | cut -c1-12)"
    fi
}
base_of() { echo "$1" | sed -E 's/\.[0-9]{14}\.g[0-9a-f]{12}(\.modified)?$//'; }

# debian_rootfs VARIANT "PACKAGE …" [TARGET_DIR]: a Debian 12 root filesystem in TARGET_DIR, from
# a tarball cached in .build-release/rootfs/ for a day (the same variant and packages are built
# once per run, and reused by the next run on this machine); without TARGET_DIR, only the tarball
# (warm_rootfs). A lock per tarball: a run that needs one being made waits for it.
debian_rootfs() {
    local variant="$1" packages target="${3:-}"
    packages=$(echo "$2" | xargs)
    local key lock
    key=$(echo "$variant $packages ${debian_sources[*]}" | sha256sum | cut -c1-12)
    local cache=".build-release/rootfs/$variant-$key.tar"
    mkdir -p .build-release/rootfs
    exec {lock}>"$cache.lock"
    flock "$lock"
    if [ ! -f "$cache" ] || [ -n "$(find "$cache" -mmin +1440)" ]; then
        log "making a Debian 12 root filesystem ($variant: ${packages:-no extra packages}) with mmdebstrap"
        local include=()
        [ -n "$packages" ] && include=(--include="${packages// /,}")
        # The output's extension tells mmdebstrap to write a tarball.
        if ! mmdebstrap --variant="$variant" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "${include[@]}" \
            --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
            bookworm "${cache%.tar}.partial.tar" "${debian_sources[@]}" >"${cache%.tar}.log" 2>&1; then
            tail -20 "${cache%.tar}.log" >&2
            exec {lock}>&-
            return 1
        fi
        mv "${cache%.tar}.partial.tar" "$cache"
    fi
    exec {lock}>&-
    [ -n "$target" ] || return 0
    rm -rf "$target"
    mkdir -p "$target"
    tar -C "$target" --numeric-owner -xf "$cache"
}

# image_rootfs TARGET_DIR "PACKAGE …": the container image's base: Debian 12's essential
# packages (no apt) and the run-time packages.
image_rootfs() { debian_rootfs essential "$2" "$1"; }

# What the Debian package depends on besides the binary's libraries: its postinst's useradd and
# groupadd. (The units reload with `push-relay reload`, so no kill, no procps.)
deb_extra_depends="passwd"

# binary_depends BINARY [--ignore-missing-info]: the Debian packages BINARY needs at run time, as
# a Depends field with versions (dpkg-shlibdeps on its ELF dependencies), plus ca-certificates.
# --ignore-missing-info passes over libraries no Debian package has (a debug build's Swift
# runtime); the release binary links the Swift runtime in, so any such library is an error there.
binary_depends() {
    local binary shlibs depends
    binary=$(realpath "$1") || return 1
    shlibs=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-shlibs.XXXXXX")
    mkdir -p "$shlibs/debian"
    printf 'Source: push-relay\n\nPackage: push-relay\nArchitecture: any\n' >"$shlibs/debian/control"
    depends=$(cd "$shlibs" && dpkg-shlibdeps ${2:+"$2"} -O -e"$binary" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
    rm -rf "$shlibs"
    [ -n "$depends" ] || return 1
    echo "$depends, ca-certificates"
}

# package_names DEPENDS: the package names of a Depends field, without versions or alternatives.
package_names() { echo "$1" | sed 's/ ([^)]*)//g; s/ *|[^,]*//g; s/,/ /g' | xargs; }

# warm_rootfs BINARY: makes (or keeps) the root filesystems the release build's image and the
# artifact tests (Deploy/test.sh) will ask for, from a build of push-relay that links the same
# libraries (scripts/test/release-lane.sh passes the debug build's, before the release binary
# exists). Only the tarballs' cache: a guess that misses costs the time, and the part that needs
# another root makes its own.
warm_rootfs() {
    local depends names
    depends=$(binary_depends "$1" --ignore-missing-info) || return 1
    names=$(package_names "$depends")
    debian_rootfs essential "$names"                                                      # the image
    debian_rootfs minbase "systemd systemd-sysv dbus curl $names $(package_names "$deb_extra_depends")" # systemd
    debian_rootfs minbase "$names"                                                        # tarball
    debian_rootfs minbase ""                                                              # deb
}

# podman as it works on these machines: runc (crun fails: "cgroups in hybrid mode not supported"),
# explicit ulimits (the defaults fail: "setrlimit RLIMIT_NOFILE: Operation not permitted"; so do
# open files above this shell's hard limit, and here processes above about 4096), and
# its storage under .build-release/containers, so nothing under /etc or /var/lib changes. The files
# are replaced whole (written aside, then renamed): artifact tests run side by side read them.
podman_env() {
    local root files
    root="$(pwd)/.build-release/containers"
    files=$(ulimit -Hn)
    [ "$files" = unlimited ] && files=65536
    mkdir -p "$root"
    cat >"$root/containers.conf.$$" <<EOF
[containers]
default_ulimits = ["nofile=$files:$files", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    cat >"$root/storage.conf.$$" <<EOF
[storage]
driver = "vfs"
graphroot = "$root/storage"
runroot = "$root/run"
EOF
    mv -f "$root/containers.conf.$$" "$root/containers.conf"
    mv -f "$root/storage.conf.$$" "$root/storage.conf"
    export CONTAINERS_CONF="$root/containers.conf" CONTAINERS_STORAGE_CONF="$root/storage.conf"
}
