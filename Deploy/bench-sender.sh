#!/usr/bin/env bash
# Sender benchmark: the libcurl HTTP/2 client alone, over one TLS connection, against nghttpd
# (nghttp2's C server, from Debian's nghttp2-server) in its own process, so the figure is the
# client's and not a Swift sink's. nghttpd answers each POST /sink with 200 and an empty body.
# Usage: Deploy/bench-sender.sh [requests] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."

requests="${1:-200000}"
concurrency="${2:-200}"
port="${BENCH_PORT:-18490}"

Deploy/bootstrap.sh
if ! command -v nghttpd >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "bench-sender: installing nghttp2-server (nghttpd)" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nghttp2-server >/dev/null
fi
swift build -c release --product push-relay-bench >&2

work=$(mktemp -d)
sink=""
trap '[ -n "$sink" ] && kill "$sink" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/htdocs"
: >"$work/htdocs/sink"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
nghttpd --htdocs="$work/htdocs" --max-concurrent-streams=1000 "$port" "$work/key.pem" "$work/cert.pem" >"$work/nghttpd.log" 2>&1 &
sink=$!
for _ in $(seq 50); do
    if curl -sf --http2 --cacert "$work/cert.pem" -X POST -o /dev/null "https://localhost:$port/sink"; then break; fi
    sleep 0.1
done

echo "machine: $(nproc) cores; sink: $(nghttpd --version)"
.build/release/push-relay-bench sender --url "https://localhost:$port/sink" --ca-file "$work/cert.pem" \
    --requests "$requests" --concurrency "$concurrency"
