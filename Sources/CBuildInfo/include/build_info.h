#ifndef PUSH_RELAY_BUILD_INFO_H
#define PUSH_RELAY_BUILD_INFO_H

/// The commit push-relay was built from: what Sources/CBuildInfo/push_relay_commit.h defines
/// (Deploy/release.sh writes it with `git rev-parse --short=12 HEAD`), or "" without it.
const char *push_relay_build_commit(void);

/// This build's version: what push_relay_commit.h defines as PUSH_RELAY_VERSION (Deploy/release.sh
/// writes the release version there, the base version with the commit's date and hash), or "".
const char *push_relay_build_version(void);

#endif
