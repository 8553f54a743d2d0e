#include "build_info.h"

// Deploy/release.sh writes push_relay_commit.h in .build-release/commit and puts that folder on
// CPATH for the release build: `#define PUSH_RELAY_COMMIT "45e1e92a1b2c"` and `#define
// PUSH_RELAY_VERSION "0.1.0.20261206050200.g45e1e92a1b2c"` (Deploy/lib.sh, release_version). A header rather than a
// -D flag: a flag changes every compiler command line, and the whole package would rebuild for
// each commit.
#if __has_include("push_relay_commit.h")
#include "push_relay_commit.h"
#endif

const char *push_relay_build_commit(void) {
#ifdef PUSH_RELAY_COMMIT
    return PUSH_RELAY_COMMIT;
#else
    return "";
#endif
}

const char *push_relay_build_version(void) {
#ifdef PUSH_RELAY_VERSION
    return PUSH_RELAY_VERSION;
#else
    return "";
#endif
}
