#!/usr/bin/env bash
# One command from a fresh clone to the whole test suite: installs missing system packages, builds,
# and runs every test against real PostgreSQL servers that the tests start themselves.
# Extra arguments go to `swift test` (for example --filter PostgresTests).
set -euo pipefail
cd "$(dirname "$0")/.."

Deploy/bootstrap.sh
swift build --build-tests
# Free space where the build and the test clusters live, for reading a failed run.
df -h . /dev/shm 2>/dev/null | sed 's/^/test.sh: /' >&2 || true
swift test "$@"
if [ "$#" -eq 0 ]; then Deploy/schemathesis.sh; fi  # whole suite only: the served OpenAPI document vs the server
