#ifndef PUSHRELAY_CLIBPQ_SHIM_H
#define PUSHRELAY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
