#ifndef PUSHRELAY_CJEMALLOC_SHIM_H
#define PUSHRELAY_CJEMALLOC_SHIM_H
#include <stddef.h>

/* Only jemalloc's control interface: <jemalloc/jemalloc.h> would declare malloc and free a second
   time beside the C library's. Linking this module puts jemalloc in front of the C library, so it
   serves every malloc of the process. */
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#endif
