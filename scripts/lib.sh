# Sourced by the scripts under scripts/: what more than one of them does. Sourcing it enters the
# repository's root, so paths such as .build/release/push-relay work from anywhere.
#   . "$(dirname "$0")/lib.sh"       (scripts/*.sh)
#   . "$(dirname "$0")/../lib.sh"    (scripts/bench/*.sh, scripts/test/*.sh)
# shellcheck shell=bash

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

script_name="$(basename "$0")"

log() { echo "$script_name: $*" >&2; }

# Prints the script's leading comment (its usage) and exits 2: `[ $# -ge 2 ] || usage`.
usage() {
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0" >&2
    exit 2
}

as_root() { if [ "$(id -u)" -ne 0 ]; then sudo "$@"; else "$@"; fi; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# apt-get install, quietly, without recommended packages (root or sudo).
apt_install() { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }

# Installs the Debian packages among the arguments that are not installed.
apt_install_missing() {
    local package missing=()
    for package in "$@"; do installed "$package" || missing+=("$package"); done
    ((${#missing[@]})) || return 0
    log "installing ${missing[*]}"
    as_root apt-get update -qq
    apt_install "${missing[@]}"
}

# Installs a pinned PyPI package (`name==version`). PIP_BREAK_SYSTEM_PACKAGES lets pip install
# into a distribution's own Python (PEP 668) as root on a fresh CI machine.
pip_install() {
    log "installing $1"
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check "$1"
    hash -r
}

# Builds of the named products (push-relay, push-relay-bench) in $bin: release builds, or debug
# ones with PUSH_RELAY_BUILD=debug (to check a script quickly; not for figures).
build="${PUSH_RELAY_BUILD:-release}"
unset PUSH_RELAY_BUILD  # the relay refuses PUSH_RELAY_* variables it does not know
bin=".build/$build"
build_products() {
    local product
    for product in "$@"; do swift build -c "$build" --product "$product" >&2; done
}

# The line a benchmark's output starts with, so a figure keeps its machine and date.
machine_line() {
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB;" \
        "$(date -u '+%Y-%m-%d %H:%M UTC'); relay $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- Sources 2>/dev/null || echo '+changes')"
}

# The items as given in odd rounds, reversed in even ones, so a drift of the machine's speed within
# a round favours none of them: `for side in $(alternate "$round" A B)`.
alternate() {
    local round="$1"
    shift
    if ((round % 2)); then echo "$@"; else printf '%s\n' "$@" | tac | tr '\n' ' '; fi
}

# An A/B script's first two arguments, the binaries, as ${binary[A]} and ${binary[B]}.
ab_binaries() {
    [ $# -ge 2 ] || usage
    # shellcheck disable=SC2034  # read by the A/B scripts
    declare -gA binary=([A]="$(realpath "$1")" [B]="$(realpath "$2")")
}

random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# CPU time (utime + stime) of a process so far, in clock ticks (getconf CLK_TCK a second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# postgres_seconds POSTMASTER_PID: the CPU time of that server's postmaster, its exited children
# (backends, autovacuum workers) and its live children, in seconds.
postgres_seconds() {
    python3 - "$1" <<'PY'
import os, sys
pm, total = sys.argv[1], 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue  # ended meanwhile: its time is in the postmaster's children's
    if pid == pm:
        total += sum(int(f) for f in fields[11:15])
    elif fields[1] == pm:
        total += int(fields[11]) + int(fields[12])
print(total / os.sysconf("SC_CLK_TCK"))
PY
}

# --- A throwaway PostgreSQL cluster (SQL-only benchmarks) ------------------------------------------
# bench_cluster NAME LINE...: $work (named NAME) holds a cluster in $cluster, made by initdb (as
# the postgres user when run as root, since initdb refuses root) with role `bench` trusted, on
# 127.0.0.1:$port (BENCH_PORT, or a free one), with LINEs added to postgresql.conf; started, and
# stopped at exit. $pg_bin: PUSH_RELAY_PG_BIN, or PostgreSQL 15's.
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop_cluster() { [ ! -f "$cluster/postmaster.pid" ] || as_postgres "$pg_bin/pg_ctl" -D "$cluster" -m immediate stop >/dev/null 2>&1 || true; }
bench_cluster() { # name, then postgresql.conf lines
    local name="$1"
    shift
    pg_bin="${PUSH_RELAY_PG_BIN:-/usr/lib/postgresql/15/bin}"
    [ -x "$pg_bin/initdb" ] || { log "no PostgreSQL 15 server programs in $pg_bin (set PUSH_RELAY_PG_BIN)"; exit 1; }
    work_dir "$name"
    cluster="$work/pg"
    trap 'stop_cluster; cleanup' EXIT
    mkdir -p "$cluster"
    [ "$(id -u)" -ne 0 ] || chown postgres "$cluster"
    as_postgres "$pg_bin/initdb" -D "$cluster" -A trust -U bench -E UTF8 --locale=C.UTF-8 >/dev/null
    port="${BENCH_PORT:-$(free_port)}"
    printf '%s\n' "port = $port" "listen_addresses = '127.0.0.1'" "unix_socket_directories = ''" "$@" >>"$cluster/postgresql.conf"
    as_postgres "$pg_bin/pg_ctl" -D "$cluster" -l "$cluster/server.log" -w start >/dev/null
}

# bench_migrate DATABASE [LAST]: Migrations/*.sql up to version LAST (all by default) in that
# database of the bench cluster, as `push-relay migrate` applies them (Sources/Postgres/Migrator.swift):
# each file in one transaction, recorded in schema_migrations with the md5 of its text, so that
# push-relay migrate goes on from there.
bench_migrate() {
    local db="$1" last="${2:-99999}" file stem
    local psql_bench=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U bench -d "$db")
    "${psql_bench[@]}" <<'SQL'
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    bigint PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
SQL
    for file in $(find Migrations -maxdepth 1 -name '[0-9]*_*.sql' | sort -t/ -k2 -n); do
        stem="$(basename "$file" .sql)"
        ((10#${stem%%_*} <= last)) || continue
        {
            echo "BEGIN;"
            cat "$file"
            printf '\n;\nINSERT INTO schema_migrations (version, name, checksum) VALUES (%d, %s, %s);\nCOMMIT;\n' \
                "$((10#${stem%%_*}))" "'${stem#*_}'" "'$(md5sum <"$file" | cut -d' ' -f1)'"
        } | "${psql_bench[@]}" >/dev/null
    done
}

# --- A throwaway relay -----------------------------------------------------------------------------
# work_dir creates $work (readable by others: as root the embedded PostgreSQL runs as an
# unprivileged user, since initdb refuses root); relay_start starts $relay_binary in it; on exit
# (or cleanup) the relay is stopped and $work removed.
work=""
relay_pid=""
relay_binary="${relay_binary:-${RELAY_BINARY:-$bin/push-relay}}"

relay_stop() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
        relay_pid=""
    fi
}

cleanup() {
    relay_stop
    if [ -n "$work" ]; then rm -rf "$work"; fi
    work=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

work_dir() { # name
    work="$(mktemp -d "/tmp/push-relay-$1.XXXXXX")"
    chmod 755 "$work"
}

# `push-relay keys create ARGS` printing the key (its last line), or failing with the command's log.
create_key() {
    local key
    key="$("$relay_binary" keys create "$@" 2>>"$work/keys.log" | tail -n 1 | tr -d '\r')"
    case "$key" in
        prk_*) echo "$key" ;;
        *) log "keys create failed:"; cat "$work/keys.log" >&2; return 1 ;;
    esac
}

# Starts `$relay_binary serve ARGS` (stdout, the start-up banner, to $work/relay.out; the log to
# $work/relay.log) and waits until http://127.0.0.1:$port/ready answers; exits with the log if
# the relay dies or is not ready within a minute.
relay_start() {
    "$relay_binary" serve "$@" >>"$work/relay.out" 2>>"$work/relay.log" &
    relay_pid=$!
    local _
    for _ in $(seq 1 240); do
        curl -sf "http://127.0.0.1:${port:?}/ready" >/dev/null && return 0
        kill -0 "$relay_pid" 2>/dev/null || break
        sleep 0.25
    done
    log "the relay did not become ready:"
    cat "$work/relay.out" "$work/relay.log" >&2
    exit 1
}

# The benchmarks' relay: one app, `bench`, with a webhook secret ($secret) and an HS256 key for
# user tokens ($user_token_key_file), on a fresh embedded durable PostgreSQL, delivery off (no
# provider credentials: intake, polls and admin jobs alone; push-relay-bench e2e measures
# delivery). Expects $port. Extra YAML (top-level sections) from $bench_yaml, the log level from
# $bench_log_level (warning).
bench_relay_config() {
    secret="${secret:-bench-secret-$(random_hex 16)}"  # kept when the relay is restarted
    user_token_key_file="$work/user-tokens.key"
    random_hex 32 > "$user_token_key_file"
    cat > "$work/config.yaml" <<YAML
http:
  port: $port
log:
  level: ${bench_log_level:-warning}
delivery:
  enabled: false
${bench_yaml:-}
apps:
  - id: bench
    webhook_secrets: ["$secret"]
    user_tokens:
      secret_file: $user_token_key_file
YAML
}

bench_relay() {
    work_dir bench
    bench_relay_config
    relay_start --config "$work/config.yaml" --data-dir "$work/data"
}

# psql on the embedded cluster in $work/data (its port and password are in its data directory).
sql() {
    local settings
    settings="$(find "$work/data" -name push-relay.conf | head -n 1)"
    PGPASSWORD="$(cat "$(dirname "$(dirname "$settings")")/password")" psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 \
        -p "$(sed -n 's/^port = //p' "$settings")" -U pushrelay -d pushrelay "$@"
}
