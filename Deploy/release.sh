#!/usr/bin/env bash
# Builds PushRelay's release artifacts into one folder (default dist/), with SHA256SUMS:
#   push-relay-VERSION-linux-ARCH.tar.gz  the binary (Swift runtime linked in; migrations, console
#                                         and OpenAPI document built in), the systemd units, the
#                                         example configuration, README, docs/, CHANGELOG, LICENSE
#                                         and DEPENDENCIES (the Debian packages it needs at run time)
#   push-relay_VERSION_DEBARCH.deb        Debian 12 package: the binary, a push-relay system
#                                         user, the units, /etc/push-relay, the docs in
#                                         /usr/share/doc/push-relay
#   push-relay-VERSION-oci.tar            OCI image archive (Debian 12 libraries and the binary;
#                                         `podman load -i`, `skopeo copy oci-archive:…`), named
#                                         localhost/push-relay:BASE (the examples' tag)
#   push-relay-kit-android-VERSION.aar    PushRelayKit for Android (Clients/PushRelayKitAndroid):
#                                         classes.jar, AndroidManifest.xml, R.txt, proguard.txt
#   push-relay-kit-android-VERSION.jar    the same classes, for a plain Java build
#   push-relay-kit-android-VERSION.pom    its Maven POM (io.pushrelay:push-relay-kit-android, aar)
# VERSION is this build's (Deploy/lib.sh, release_version: 0.1.0.20261206050200.g45e1e92a1b2c, or
# 0.1.0 for a build of the tag v0.1.0), compiled in: --version and /ready show it. A previous
# build's artifacts in the folder are removed, so it holds one build.
# Usage: Deploy/release.sh [--out DIR] [--no-image]
# Needs root (or sudo) for apt-get and the image's root filesystem; builds with the Swift toolchain
# in .build-release/, the Android library with Clients/PushRelayKitAndroid/build.sh (its tools in
# .build-android/). Deploy/test.sh runs what this makes.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. Deploy/lib.sh

out=dist
with_image=1
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-image) with_image=0; shift ;;
    *) usage ;;
    esac
done

scripts/bootstrap.sh
apt_install_missing dpkg-dev binutils
((with_image)) && apt_install_missing mmdebstrap podman runc uidmap

version=$(release_version) || { log "no version in Sources/PushRelay/App/PushRelayVersion.swift"; exit 1; }
base=$(base_version)
commit=$(release_commit)
arch=$(uname -m)
debarch=$(dpkg --print-architecture)
mkdir -p "$out"
out=$(cd "$out" && pwd)
# One build per folder: `apt-get install ./push-relay_*_amd64.deb` (docs/operations.md) takes them all.
previous=$(cd "$out" && ls -d -- push-relay-*-linux-*.tar.gz push-relay_*_*.deb push-relay-*-oci.tar push-relay-kit-android-*.aar \
    push-relay-kit-android-*.jar push-relay-kit-android-*.pom SHA256SUMS 2>/dev/null || true)
if [ -n "$previous" ]; then
    log "removing the previous build's artifacts from $out: $(echo "$previous" | xargs)"
    (cd "$out" && echo "$previous" | xargs rm -f --)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. The binary: the Swift standard library and Foundation linked in, the version and commit compiled in.
started=$SECONDS
log "building push-relay $version ($commit), release, static Swift runtime"
# The version and commit go in through a header in the release build's own folder, found through
# CPATH: nothing in the source tree changes (a debug build may run meanwhile), and no compiler
# command line does (the compiler's dependency file has the header, so a new commit recompiles
# build_info.c alone). No debug information: the binary is stripped below, and writing it cost
# a tenth of the compiler's CPU time per module (0.77-1.05, median 0.90, 14 interleaved pairs).
mkdir -p .build-release/commit
commit_define=$(printf '#define PUSH_RELAY_COMMIT "%s"\n#define PUSH_RELAY_VERSION "%s"' "$commit" "$version")
commit_header=.build-release/commit/push_relay_commit.h
# Rewritten only when the commit or version changed, so an unchanged one recompiles nothing.
[ "$(cat "$commit_header" 2>/dev/null)" = "$commit_define" ] || echo "$commit_define" >"$commit_header"
CPATH="$PWD/.build-release/commit${CPATH:+:$CPATH}" \
    swift build -c release --product push-relay --static-swift-stdlib -debug-info-format none --scratch-path .build-release >&2
log "built in $((SECONDS - started)) s"
binary="$work/push-relay"
cp .build-release/release/push-relay "$binary"
strip --strip-unneeded "$binary"
reported=$("$binary" --version)
[ "$reported" = "$version (commit $commit)" ] || { log "the binary reports '$reported', not '$version (commit $commit)'"; exit 1; }

# 2. What it needs at run time: Debian packages, from its ELF dependencies (dpkg-shlibdeps).
depends=$(binary_depends "$binary") || { log "dpkg-shlibdeps found no packages for $binary"; exit 1; }
log "depends: $depends"

# 3. The tarball.
name="push-relay-$version-linux-$arch"
stage="$work/$name"
mkdir -p "$stage/bin" "$stage/systemd"
cp "$binary" "$stage/bin/push-relay"
cp Deploy/push-relay.service Deploy/push-relay@.service "$stage/systemd/"
cp Deploy/push-relay.example.yaml "$stage/push-relay.example.yaml"
cp README.md CHANGELOG.md LICENSE "$stage/"
mkdir -p "$stage/docs" && cp docs/*.md "$stage/docs/"
{
    echo "push-relay $version (commit $commit), built $(date -u +%Y-%m-%d) on $(. /etc/os-release && echo "$PRETTY_NAME")."
    echo "Debian/Ubuntu packages it needs at run time (apt-get install …):"
    echo "  $(package_names "$depends")"
    echo "With versions: $depends"
    echo "Shared libraries (ldd on the build machine):"
    ldd "$binary" | sed 's/ (0x[0-9a-f]*)//; s/^\t/  /'
} >"$stage/DEPENDENCIES"
tar -C "$work" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"

# 4. The Debian package.
deb="$work/deb"
install -D -m 0755 "$binary" "$deb/usr/bin/push-relay"
for unit in push-relay.service push-relay@.service; do
    install -D -m 0644 "Deploy/$unit" "$deb/lib/systemd/system/$unit"
    sed -i 's|/usr/local/bin/push-relay|/usr/bin/push-relay|g' "$deb/lib/systemd/system/$unit"
done
install -D -m 0640 Deploy/push-relay.example.yaml "$deb/etc/push-relay/push-relay.yaml"
install -D -m 0644 README.md "$deb/usr/share/doc/push-relay/README.md"
# The operator's documents beside it (the README's docs/…), uncompressed so their links hold.
install -m 0644 docs/*.md "$deb/usr/share/doc/push-relay/"
install -D -m 0644 Deploy/push-relay.example.yaml "$deb/usr/share/doc/push-relay/examples/push-relay.example.yaml"
gzip -9n <CHANGELOG.md >"$work/changelog.gz" && install -m 0644 "$work/changelog.gz" "$deb/usr/share/doc/push-relay/changelog.gz"
# Machine-readable (DEP-5). The licence's full text is Debian's /usr/share/common-licenses/Apache-2.0,
# not copied into the package (policy 12.5).
cat >"$deb/usr/share/doc/push-relay/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: push-relay
Upstream-Contact: PushRelay project <security@pushrelay.dev>

Files: *
Copyright: The PushRelay project authors
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
 http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0".
EOF
install -d "$deb/DEBIAN"
install -m 0755 Deploy/debian/postinst Deploy/debian/prerm Deploy/debian/postrm "$deb/DEBIAN/"
echo /etc/push-relay/push-relay.yaml >"$deb/DEBIAN/conffiles"
cat >"$deb/DEBIAN/control" <<EOF
Package: push-relay
Version: $version
Architecture: $debarch
Maintainer: PushRelay project <security@pushrelay.dev>
Installed-Size: $(du -sk --exclude=DEBIAN "$deb" | cut -f1)
Depends: $depends, $deb_extra_depends
Section: net
Priority: optional
Homepage: https://github.com/push-relay/push-relay
Description: push-notification relay for helpdesk webhooks (APNs and FCM)
 PushRelay takes a helpdesk's webhook when an agent replies, stores it in
 PostgreSQL, keeps the device registry and unread counts, and sends the push
 to APNs and FCM over HTTP/2. The systemd unit is installed but not enabled:
 configure /etc/push-relay first.
EOF
# xz's fastest preset: 12 CPU-s (6 s on two cores) for 25.6 MB; the default preset took 68 CPU-s
# for 21.7 MB in a CI run (2026-11-28).
dpkg-deb --root-owner-group -Zxz -z1 --build "$deb" "$out/push-relay_${version}_$debarch.deb" >/dev/null

# 5. PushRelayKit for Android: no Swift in it, built (javac, 10 s) after the Swift build so as not
# to slow it, and before the image, whose root filesystem scripts/test/release-lane.sh may still be
# making. build.sh checks it (class version 51, the Android API at minSdk 21, dx, the manifest).
android=("push-relay-kit-android-$version".{aar,jar,pom})
Clients/PushRelayKitAndroid/build.sh --out "$out" --version "$version" >&2

# 6. The OCI image: Debian 12's libraries (mmdebstrap, essential packages only) plus the binary.
if ((with_image)); then
    rootfs="$work/rootfs"
    image_rootfs "$rootfs" "$(package_names "$depends")"
    install -m 0755 "$binary" "$rootfs/usr/bin/push-relay"
    install -D -m 0644 Deploy/push-relay.example.yaml "$rootfs/usr/share/doc/push-relay/push-relay.example.yaml"
    echo "push-relay:x:10001:10001:PushRelay:/var/lib/push-relay:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
    echo "push-relay:x:10001:" >>"$rootfs/etc/group"
    install -d -m 0755 "$rootfs/etc/push-relay"
    install -d -m 0750 -o 10001 -g 10001 "$rootfs/var/lib/push-relay"
    podman_env
    # Named with the base version, as the compose and Kubernetes examples use it (an OCI archive
    # podman loads holds one name); the build's version is its label and in the archive's name.
    # Here it is tagged with both.
    image="localhost/push-relay:$base"
    # One by one: podman 4.3's `rmi -f A B` stops at the first that does not exist.
    podman rmi -f "$image" >/dev/null 2>&1 || true
    podman rmi -f "localhost/push-relay:$version" >/dev/null 2>&1 || true
    tar -C "$rootfs" --numeric-owner -c . | podman import \
        --change 'USER=10001:10001' \
        --change 'WORKDIR=/var/lib/push-relay' \
        --change 'ENV=HTTP_HOST=0.0.0.0' \
        --change 'EXPOSE=8080' \
        --change 'STOPSIGNAL=SIGTERM' \
        --change 'ENTRYPOINT=["/usr/bin/push-relay"]' \
        --change 'CMD=["serve","--config","/etc/push-relay/push-relay.yaml"]' \
        --change "LABEL=org.opencontainers.image.version=$version" \
        --change "LABEL=org.opencontainers.image.revision=$commit" \
        --change 'LABEL=org.opencontainers.image.title=push-relay' \
        --change 'LABEL=org.opencontainers.image.licenses=Apache-2.0' \
        - "$image" >/dev/null
    [ "$version" = "$base" ] || podman tag "$image" "localhost/push-relay:$version"
    rm -f "$out/push-relay-$version-oci.tar"
    podman save --format oci-archive -o "$out/push-relay-$version-oci.tar" "$image"
fi

(cd "$out" && rm -f SHA256SUMS && sha256sum -- *.tar.gz *.deb $( ((with_image)) && echo "*-oci.tar") "${android[@]}" >SHA256SUMS)
log "artifacts in $out ($((SECONDS - started)) s in all):"
(cd "$out" && ls -l --block-size=K -- *.tar.gz *.deb $( ((with_image)) && echo "*-oci.tar") "${android[@]}" SHA256SUMS) >&2
