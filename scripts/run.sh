#!/usr/bin/env bash
# One command from a fresh clone to a running relay, for trying PushRelay or working on it:
# installs missing system packages, builds a release binary and serves on http://127.0.0.1:8080
# with the embedded PostgreSQL in ./.push-relay-data (or the database in DATABASE_URL). Extra
# arguments go to `push-relay serve`. A server runs the binary under Deploy/push-relay.service.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

scripts/bootstrap.sh
log "building push-relay (release; the first build takes several minutes)"
build_products push-relay
exec "$bin/push-relay" serve "$@"
