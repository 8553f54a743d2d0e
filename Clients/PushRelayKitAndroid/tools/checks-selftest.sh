#!/usr/bin/env bash
# Proves that build.sh's checks catch what they are there for: api-check.py must refuse a JDK-only
# call (java.lang.management), the hidden org.json JSONObject.keySet() and java.nio.file (API 26),
# and dx must refuse Java 8 bytecode (a lambda). A clean class must pass both, or a check that
# refuses everything would pass too.
# Usage: Clients/PushRelayKitAndroid/tools/checks-selftest.sh
# Installs or fetches what is missing through build.sh --tools-only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/../build.sh" --tools-only
cd "$here/../../.."
dx=(java -cp .build-android/tools/dx/usr/share/java/com.android.tools.build.builder-2.2.2.jar:/usr/share/java/guava.jar
    com.android.dx.command.Main --dex)
json_jar=/usr/share/java/com.android.json.jar
tmp=$(mktemp -d "${TMPDIR:-/tmp}/push-relay-kit-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# write_class NAME BODY: class io.pushrelay.kit.selftest.NAME in $tmp/src.
write_class() {
    mkdir -p "$tmp/src"
    printf 'package io.pushrelay.kit.selftest;\n\npublic class %s {\n    %s\n}\n' "$1" "$2" >"$tmp/src/$1.java"
}
write_class UsesManagement \
    'public static String name() { return java.lang.management.ManagementFactory.getRuntimeMXBean().getName(); }'
write_class UsesKeySet 'public static int count() { return new org.json.JSONObject().keySet().size(); }'
write_class UsesNioFile \
    'public static boolean exists(String path) { return java.nio.file.Files.exists(java.nio.file.Paths.get(path)); }'
# The control: what the library does (org.json without keySet, HttpURLConnection, AES-GCM).
write_class Clean 'public static String run(org.json.JSONObject o) throws Exception {
        javax.crypto.Cipher.getInstance("AES/GCM/NoPadding").init(javax.crypto.Cipher.DECRYPT_MODE,
            new javax.crypto.spec.SecretKeySpec(new byte[16], "AES"), new javax.crypto.spec.GCMParameterSpec(128, new byte[12]));
        java.net.HttpURLConnection c = (java.net.HttpURLConnection) new java.net.URL("https://example.com").openConnection();
        c.setUseCaches(false);
        return o.keys().next() + c.getResponseCode();
    }'
# One javac run for the Java 7 classes (javac's start-up is most of its time).
javac --release 7 -Xlint:-options -encoding UTF-8 -cp "$json_jar" -d "$tmp/classes" "$tmp"/src/*.java
class_file() { echo "$tmp/classes/io/pushrelay/kit/selftest/$1.class"; }

cases=0
caught=0
# api_case NAME EXPECTED: api-check.py fails on the class and prints EXPECTED.
api_case() {
    cases=$((cases + 1))
    local status=0
    python3 "$here/api-check.py" --cache .build-android/tools/api-surface.json "$(class_file "$1")" >"$tmp/$1.out" || status=$?
    if [ "$status" -ne 0 ] && grep -qF -- "$2" "$tmp/$1.out"; then
        caught=$((caught + 1))
    else
        echo "not caught: $1 (api-check exit $status; expected a line starting: $2):" >&2
        cat "$tmp/$1.out" >&2
    fi
}
api_case UsesManagement "io.pushrelay.kit.selftest.UsesManagement: references java.lang.management.ManagementFactory.getRuntimeMXBean()Ljava/lang/management/RuntimeMXBean; which is not in the Android API 36 surface"
api_case UsesKeySet "io.pushrelay.kit.selftest.UsesKeySet: references org.json.JSONObject.keySet()Ljava/util/Set; which is not in the Android API 36 surface"
api_case UsesNioFile "io.pushrelay.kit.selftest.UsesNioFile: references java.nio.file.Files.exists(Ljava/nio/file/Path;[Ljava/nio/file/LinkOption;)Z which is not available at minSdk 21"

cases=$((cases + 1))
mkdir -p "$tmp/java8/src"
printf 'package io.pushrelay.kit.selftest;\n\npublic class UsesLambda {\n    public static void run() { Runnable r = () -> { }; r.run(); }\n}\n' \
    >"$tmp/java8/src/UsesLambda.java"
javac --release 8 -encoding UTF-8 -d "$tmp/java8/classes" "$tmp/java8/src/UsesLambda.java"
if "${dx[@]}" --output="$tmp/lambda.dex" "$tmp/java8/classes" >"$tmp/java8/out" 2>&1; then
    echo "not caught: UsesLambda (dx took Java 8 bytecode)" >&2
elif grep -q "version (0034.0000)" "$tmp/java8/out"; then
    caught=$((caught + 1))
else
    echo "not caught: UsesLambda (dx failed, but not on the class version):" >&2
    cat "$tmp/java8/out" >&2
fi

clean=1
python3 "$here/api-check.py" --cache .build-android/tools/api-surface.json "$(class_file Clean)" >"$tmp/Clean.out" ||
    { clean=0; echo "control refused by api-check:" >&2; cat "$tmp/Clean.out" >&2; }
mkdir -p "$tmp/clean/io/pushrelay/kit/selftest"
cp "$(class_file Clean)" "$tmp/clean/io/pushrelay/kit/selftest/"
"${dx[@]}" --output="$tmp/clean.dex" "$tmp/clean" >"$tmp/clean.dx" 2>&1 ||
    { clean=0; echo "control refused by dx:" >&2; cat "$tmp/clean.dx" >&2; }

((clean)) && echo "control: a clean class passes api-check and dx"
echo "api/dex checks: $caught of $cases violations caught"
[ "$caught" -eq "$cases" ] && ((clean))
