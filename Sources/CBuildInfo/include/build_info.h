#ifndef PUSH_RELAY_BUILD_INFO_H
#define PUSH_RELAY_BUILD_INFO_H

/// The commit push-relay was built from: what `-Xcc -DPUSH_RELAY_COMMIT=<hex>` gave the build
/// (Deploy/release.sh passes `git rev-parse --short=12 HEAD`), or "" when nothing did.
const char *push_relay_build_commit(void);

#endif
