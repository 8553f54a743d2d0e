#!/usr/bin/env bash
# Builds, checks and packs PushRelayKit for Android into one folder (default .build-android/dist):
#   push-relay-kit-android-VERSION.aar  AndroidManifest.xml, classes.jar, an empty R.txt and
#                                       proguard.txt (consumer rules)
#   push-relay-kit-android-VERSION.jar  the same classes, for a plain Java build
#   push-relay-kit-android-VERSION.pom  Maven POM (io.pushrelay:push-relay-kit-android, aar)
# Usage: Clients/PushRelayKitAndroid/build.sh [--out DIR] [--version VERSION]
# VERSION defaults to this build of PushRelay's (Deploy/lib.sh, release_version). Fails on:
# javac --release 7 -Xlint:all -Werror (the Java 7 API, class version 51), tools/api-check.py (a
# reference outside the Android API 36 surface or above minSdk 21), dx (it refuses Java 8
# bytecode) and dexdump's checksum, aapt on the manifest. Installs what is missing (apt-get and
# pip: root or sudo). No Android SDK needed (see /work/shared/ANDROID.md for why these tools).
set -euo pipefail
caller=$PWD
here=$(cd "$(dirname "$0")" && pwd)
library=$here
. "$here/../../scripts/lib.sh" # enters the repository's root
. Deploy/lib.sh

out=.build-android/dist
version=""
tools_only=0
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$(cd "$caller" && realpath -m "$2"); shift 2 ;;
    --version) version="$2"; shift 2 ;;
    # Not in the usage: the library folder (src/…), to try the script on a scratch copy; and
    # only installing and fetching the tools (tools/checks-selftest.sh).
    --src) library=$(cd "$caller" && realpath "$2"); shift 2 ;;
    --tools-only) tools_only=1; shift ;;
    *) usage ;;
    esac
done
version=${version:-$(release_version)}
# It goes into file names and the POM's XML as it is.
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ ]] || { log "bad version: '$version'"; exit 2; }

stubs_pin=chaquopy-stubs-android==36.20260406
dx_deb=libgradle-android-plugin-java=2.2.2-4 # dx 1.11; Debian has no d8 and no other dx
json_jar=/usr/share/java/com.android.json.jar
guava_jar=/usr/share/java/guava.jar
framework_res=/usr/share/android-framework-res/framework-res.apk
tools=.build-android/tools
dx_jar=$tools/dx/usr/share/java/com.android.tools.build.builder-2.2.2.jar
name=push-relay-kit-android-$version

tmp=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-kit-android.XXXXXX")
trap 'rm -rf "$tmp"' EXIT # replaces scripts/lib.sh's trap: no relay here

started=$EPOCHREALTIME
step_started=$started
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
step() { log "$1 ($(seconds_since "$step_started") s)"; step_started=$EPOCHREALTIME; }

# 1. Tools. The JDK only when there is no javac (JDK 17 is on these machines).
command -v javac >/dev/null && command -v jar >/dev/null || apt_install_missing default-jdk-headless
apt_install_missing libandroid-json-java libguava-java dexdump aapt android-framework-res
python3 -c 'import importlib.metadata as m, sys; sys.exit(m.version(sys.argv[1]) != sys.argv[2])' \
    "${stubs_pin%==*}" "${stubs_pin#*==}" 2>/dev/null || pip_install "$stubs_pin"
if [ ! -f "$dx_jar" ]; then
    log "fetching dx ($dx_deb)"
    mkdir -p "$tools/deb"
    # As root apt-get warns that _apt cannot write here and downloads unsandboxed: harmless.
    download() { (cd "$tools/deb" && apt-get download -qq "$dx_deb" 2>&1 | grep -v "_apt" >&2) || true; }
    download
    if ! ls "$tools"/deb/libgradle-android-plugin-java_*.deb >/dev/null 2>&1; then
        as_root apt-get update -qq # a fresh machine has no package lists
        download
    fi
    rm -rf "$tools/dx"
    dpkg -x "$tools"/deb/libgradle-android-plugin-java_*.deb "$tools/dx.partial"
    mv "$tools/dx.partial" "$tools/dx"
    [ -f "$dx_jar" ] || { log "no $dx_jar in the package"; exit 1; }
fi
step "tools ready"
((tools_only)) && exit 0

# 2. Compile: the Java 7 API (Android's core library at minSdk 21 is close to it) against
# Android's org.json, with the compile-only annotations in the same run (javac's start-up is
# most of its time) but not in classes.jar.
javac_flags=(--release 7 -Xlint:all -Xlint:-options -Werror -encoding UTF-8 -implicit:none)
mapfile -t sources < <(find "$library/src/main/java" -name '*.java' | sort)
((${#sources[@]})) || { log "no Java sources in $library/src/main/java"; exit 1; }
javac "${javac_flags[@]}" -cp "$json_jar" -sourcepath "" -d "$tmp/compiled" \
    "$library"/src/compileOnly/java/androidx/annotation/*.java "${sources[@]}"
step "compiled ${#sources[@]} sources"

# 3. classes.jar: the library's classes only, each of class version 51 (Java 7).
stray=$(cd "$tmp/compiled" && find . -type f ! -path './io/pushrelay/kit/*' ! -path './androidx/annotation/*')
[ -z "$stray" ] || { log "classes outside io.pushrelay.kit: $stray"; exit 1; }
mkdir -p "$tmp/classes/io/pushrelay"
cp -r "$tmp/compiled/io/pushrelay/kit" "$tmp/classes/io/pushrelay/"
python3 - "$tmp/classes" <<'PY'
import pathlib, sys
bad = [str(p) for p in pathlib.Path(sys.argv[1]).rglob("*.class") if p.read_bytes()[6:8] != b"\x00\x33"]
sys.exit("class version is not 51 (Java 7): " + " ".join(bad) if bad else 0)
PY
# The commit's time in the entries (jar --date), and a sorted entry list: the same sources give
# the same bytes.
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 2000-01-01T00:00:00Z)
pack() { # ARCHIVE DIR: DIR's files, sorted, no META-INF/MANIFEST.MF
    local files
    mapfile -t files < <(cd "$2" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
    (cd "$2" && jar --create --no-manifest --date="$date" --file "$1" "${files[@]}")
}
pack "$tmp/classes.jar" "$tmp/classes"
step "classes.jar: $(find "$tmp/classes" -name '*.class' | wc -l) classes, version 51"

# 4. The references against the Android API surface (the stubs' parse is cached in $tools).
python3 "$here/tools/api-check.py" --cache "$tools/api-surface.json" "$tmp/classes.jar" >&2
step "api-check"

# 5. DEX: what the app's build will do with classes.jar (dx 1.11 has no --min-sdk-version; it
# writes DEX 035, which every Android version reads).
java -cp "$dx_jar:$guava_jar" com.android.dx.command.Main --dex --output="$tmp/classes.dex" "$tmp/classes.jar"
dexdump -c "$tmp/classes.dex" >"$tmp/dexdump.txt" 2>&1 && grep -q "Checksum verified" "$tmp/dexdump.txt" ||
    { cat "$tmp/dexdump.txt" >&2; log "dexdump refused classes.dex"; exit 1; }
step "dx and dexdump: classes.dex $(stat -c %s "$tmp/classes.dex") bytes"

# 6. The manifest, compiled against the framework's resources (unknown android: attributes and
# bad XML fail), then read back.
aapt package -f -M "$library/src/main/AndroidManifest.xml" -I "$framework_res" -F "$tmp/manifest.apk" >&2
aapt dump badging "$tmp/manifest.apk" >"$tmp/badging.txt" 2>&1 || true
for expected in "package: name='io.pushrelay.kit'" "sdkVersion:'21'" "uses-permission: name='android.permission.INTERNET'"; do
    grep -q "$expected" "$tmp/badging.txt" || { cat "$tmp/badging.txt" >&2; log "manifest: no $expected"; exit 1; }
done
step "aapt: manifest"

# 7. The artifacts.
mkdir -p "$tmp/aar" "$out"
out=$(cd "$out" && pwd) # printed below: absolute, whatever the caller's directory
cp "$library/src/main/AndroidManifest.xml" "$library/src/main/proguard.txt" "$tmp/classes.jar" "$tmp/aar/"
: >"$tmp/aar/R.txt"
pack "$tmp/$name.aar" "$tmp/aar"
cp "$tmp/classes.jar" "$tmp/$name.jar"
cat >"$tmp/$name.pom" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
    xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.pushrelay</groupId>
  <artifactId>push-relay-kit-android</artifactId>
  <version>$version</version>
  <packaging>aar</packaging>
  <name>PushRelayKit for Android</name>
  <description>The Android client library of PushRelay, the push-notification relay: for apps that receive pushes through it. Java 7 API, minSdk 21, no dependencies.</description>
  <licenses>
    <license>
      <name>Apache-2.0</name>
      <url>https://www.apache.org/licenses/LICENSE-2.0.txt</url>
      <distribution>repo</distribution>
    </license>
  </licenses>
</project>
EOF
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$tmp/$name.pom"
mv -f "$tmp/$name.aar" "$tmp/$name.jar" "$tmp/$name.pom" "$out/"
step "packed"

log "built $name in $(seconds_since "$started") s:"
for artifact in aar jar pom; do echo "$out/$name.$artifact"; done
