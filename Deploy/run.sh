#!/usr/bin/env bash
# One command from a fresh clone to a running relay: installs missing system packages, builds a
# release binary and serves on http://127.0.0.1:8080 with the embedded PostgreSQL in
# ./.push-relay-data (or the database in DATABASE_URL). Extra arguments go to `push-relay serve`.
set -euo pipefail
cd "$(dirname "$0")/.."

Deploy/bootstrap.sh
echo "run: building push-relay (release; the first build takes several minutes)" >&2
swift build -c release --product push-relay
exec .build/release/push-relay serve "$@"
