#!/usr/bin/env bash
# Sender benchmark: the libcurl HTTP/2 client alone, over one TLS connection, against nghttpd
# (nghttp2's C server, from Debian's nghttp2-server) in its own process, so the figure is the
# client's and not a Swift sink's. nghttpd answers each POST /sink with 200 and an empty body.
# Then, in the same invocation, h2load (nghttp2's C load generator) on one connection to the same
# sink with the same payload, headers and streams in flight, interleaved round by round with the
# sender (sender first in odd rounds, h2load first in even ones), and the sender/h2load ratio of
# each round. With a list of thread counts (fourth argument, e.g. "1 2"), each round runs the sender
# once per count (HTTP2Client's event threads, one connection each) and prints each one's ratio.
# Usage: scripts/bench/sender.sh [requests (200000)] [concurrency (200)] [rounds (1)] [threads ("1")]
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

requests="${1:-200000}"
concurrency="${2:-200}"
rounds="${3:-1}"
threads_list="${4:-1}"
port="${BENCH_PORT:-18490}"

scripts/bootstrap.sh
apt_install_missing nghttp2-server nghttp2-client  # nghttpd, h2load
build_products push-relay-bench

work_dir sender
sink=""
trap '[ -n "$sink" ] && kill "$sink" 2>/dev/null; cleanup' EXIT
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

machine_line
echo "sink: $(nghttpd --version); $(h2load --version | head -n 1)"
payload='{"aps":{"alert":{"title":"Agent replied","body":"Reply on your ticket"},"badge":1,"sound":"default"},"zendesk_sdk_request_id":"5"}'
printf '%s' "$payload" > "$work/payload.json"
tick=$(getconf CLK_TCK)
sink_ticks() { cpu_ticks "$sink"; }
# nghttpd's CPU seconds since it had $1 ticks.
sink_seconds_since() { awk -v a="$1" -v b="$(sink_ticks)" -v t="$tick" 'BEGIN { printf "%.3f", (b - a) / t }'; }
# CPU per request in microseconds: $1 seconds of CPU over $requests requests.
per_request() { awk -v s="$1" -v n="$requests" 'BEGIN { printf "%.1f", s * 1e6 / n }'; }
# Runs a command in a subshell and prints the CPU seconds (user + system) its children used, from
# bash's `times`, after the command's own output has gone to $2.
cpu_of() { # command-string output-file
    ( eval "$1" >"$2" 2>&1; times ) | tail -n 1 | awk '{
        split($1, u, /m|s/); split($2, y, /m|s/); printf "%.3f", u[1] * 60 + u[2] + y[1] * 60 + y[2] }'
}
sender() { # threads
    local before cpu
    before=$(sink_ticks)
    cpu=$(cpu_of "$bin/push-relay-bench sender --url https://localhost:$port/sink --ca-file $work/cert.pem \
        --requests $requests --concurrency $concurrency --threads $1" "$work/sender.out")
    cat "$work/sender.out" >&2
    local sink_cpu; sink_cpu=$(sink_seconds_since "$before")
    echo "$(sed -n 's/.*throughput  \([0-9]*\) pushes.*/\1/p' "$work/sender.out")/$(per_request "$cpu")/$(per_request "$sink_cpu")"
}
senders() { # one run per thread count: "threads:pushes/s/cpu-us/sink-cpu-us ..."
    local out=""
    for t in $threads_list; do out="$out $t:$(sender "$t")"; done
    echo "$out"
}
h2() {
    local before cpu
    before=$(sink_ticks)
    cpu=$(cpu_of "h2load -n $requests -c 1 -m $concurrency -d $work/payload.json \
        -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' -H 'apns-priority: 10' -H 'content-type: application/json' \
        https://localhost:$port/sink" "$work/h2load.out")
    grep -q '^finished in' "$work/h2load.out" || { cat "$work/h2load.out" >&2; exit 1; }
    grep -E '^finished in|^requests:|^status codes:' "$work/h2load.out" | sed 's/^/  h2load: /' >&2
    local sink_cpu; sink_cpu=$(sink_seconds_since "$before")
    echo "$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$work/h2load.out")/$(per_request "$cpu")/$(per_request "$sink_cpu")"
}
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then s=$(senders); h=$(h2); else h=$(h2); s=$(senders); fi
    IFS=/ read -r hv hcpu hsink <<<"$h"
    for entry in $s; do
        t="${entry%%:*}"
        IFS=/ read -r v cpu sink_cpu <<<"${entry#*:}"
        echo "round $round: sender ($t event thread$([ "$t" = 1 ] || echo s)) $v pushes/s, h2load $hv req/s on one connection, sender/h2load $(awk -v s="$v" -v h="$hv" 'BEGIN { printf "%.2f", s / h }')"
        echo "round $round: CPU per request: sender ($t) $cpu us (nghttpd $sink_cpu us while serving it), h2load $hcpu us (nghttpd $hsink us)"
    done
done
