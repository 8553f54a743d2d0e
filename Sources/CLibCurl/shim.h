#ifndef PUSHRELAY_CLIBCURL_SHIM_H
#define PUSHRELAY_CLIBCURL_SHIM_H
#include <curl/curl.h>
#endif
