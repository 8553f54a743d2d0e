#include "build_info.h"

#define PUSH_RELAY_STRING(x) #x
#define PUSH_RELAY_EXPAND(x) PUSH_RELAY_STRING(x)

const char *push_relay_build_commit(void) {
#ifdef PUSH_RELAY_COMMIT
    return PUSH_RELAY_EXPAND(PUSH_RELAY_COMMIT);
#else
    return "";
#endif
}
