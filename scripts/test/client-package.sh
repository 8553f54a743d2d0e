#!/usr/bin/env bash
# PushRelayKit as an app adds it: the package in Clients/PushRelayKit must have no dependency (an
# app that adds it fetches and builds nothing of the relay), and must build and pass its unit tests
# on its own, in a scratch directory of its own. The tests against a running relay are in the main
# suite (IntegrationTests/Client).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

package=Clients/PushRelayKit
scratch=.build/client-package
dependencies=$(swift package --package-path "$package" --scratch-path "$scratch" show-dependencies --format flatlist)
if [ -n "$dependencies" ]; then
    echo "$script_name: $package must have no dependency, it has: $dependencies" >&2
    exit 1
fi
swift build --package-path "$package" --scratch-path "$scratch" --build-tests
swift test --package-path "$package" --scratch-path "$scratch" --skip-build
echo "$script_name: $package builds and passes on its own, with no dependency"
