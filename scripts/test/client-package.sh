#!/usr/bin/env bash
# PushRelayKit as an app adds it: the package in Clients/PushRelayKit must depend on swift-crypto
# only (and the swift-asn1 it brings; built on Linux only, for encrypted pushes), so an app that
# adds it fetches and builds nothing of the relay, and must build and pass its unit tests on its
# own, in a scratch directory of its own. The tests against a running relay are in the main
# suite (IntegrationTests/Client).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

package=Clients/PushRelayKit
scratch=.build/client-package
dependencies=$(swift package --package-path "$package" --scratch-path "$scratch" show-dependencies --format flatlist | sort | tr '\n' ' ')
if [ "$dependencies" != "swift-asn1 swift-crypto " ]; then
    echo "$script_name: $package must depend on swift-crypto (and its swift-asn1) only, it has: $dependencies" >&2
    exit 1
fi
swift build --package-path "$package" --scratch-path "$scratch" --build-tests
swift test --package-path "$package" --scratch-path "$scratch" --skip-build
echo "$script_name: $package builds and passes on its own, with swift-crypto as its one dependency"
