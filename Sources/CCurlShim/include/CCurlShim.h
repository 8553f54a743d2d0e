#ifndef PUSHRELAY_CCURLSHIM_H
#define PUSHRELAY_CCURLSHIM_H

#include <curl/curl.h>

/// Typed wrappers for libcurl's variadic option setters, which Swift cannot call directly.
/// The pattern follows swift-corelibs-foundation's `CFURLSession_easy_setopt_*`.

CURLcode pushrelay_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode pushrelay_curl_easy_setopt_ptr(CURL *handle, CURLoption option, void *value);
CURLcode pushrelay_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode pushrelay_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode pushrelay_curl_easy_setopt_write_callback(CURL *handle,
    size_t (*callback)(char *, size_t, size_t, void *));
CURLcode pushrelay_curl_easy_setopt_header_callback(CURL *handle,
    size_t (*callback)(char *, size_t, size_t, void *));
/// Sets CURLOPT_SOCKOPTFUNCTION / CURLOPT_CLOSESOCKETFUNCTION and their data pointer, so the
/// caller learns which sockets a handle's connections use, and when they close.
CURLcode pushrelay_curl_easy_setopt_socket_callbacks(CURL *handle, void *clientp,
    int (*opened)(void *, curl_socket_t, curlsocktype),
    int (*closing)(void *, curl_socket_t));
/// Sets or clears TCP_CORK on a socket (Linux): while set, small writes are held and sent as
/// full segments when it is cleared.
int pushrelay_tcp_cork(curl_socket_t socket, int on);
/// The TLS connections of one event loop that read ahead (see shim.c): created with the loop, freed
/// after its multi handle is cleaned up (freeing the connections takes them out of the set).
struct pushrelay_tls_set;
struct pushrelay_tls_set *pushrelay_tls_set_create(void);
void pushrelay_tls_set_free(struct pushrelay_tls_set *set);
/// Connections in the set now.
size_t pushrelay_tls_set_count(const struct pushrelay_tls_set *set);
/// 1 when some connection holds bytes read from its socket that curl has not taken yet.
int pushrelay_tls_set_pending(const struct pushrelay_tls_set *set);
/// Turns on OpenSSL read-ahead for the connections this handle opens, registering each in `set`.
/// Fails harmlessly (CURLE_NOT_BUILT_IN) when libcurl's TLS backend is not OpenSSL.
CURLcode pushrelay_curl_easy_setopt_read_ahead(CURL *handle, struct pushrelay_tls_set *set);
/// A header list for CURLOPT_HTTPHEADER built in one allocation from `count` NUL-terminated lines
/// laid end to end in `lines` (`length` bytes in all). Free it with free(), not
/// curl_slist_free_all(). NULL when `count` is 0, on allocation failure or malformed input.
struct curl_slist *pushrelay_slist_from_lines(const char *lines, size_t length, size_t count);

/// Names the calling thread (at most 15 bytes reach the kernel): profiles and `top -H` show it.
void pushrelay_name_this_thread(const char *name);
CURLcode pushrelay_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode pushrelay_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);
CURLMcode pushrelay_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value);
CURLMcode pushrelay_curl_multi_setopt_ptr(CURLM *handle, CURLMoption option, void *value);

/// The CURLMsg fields Swift cannot reach through the union: the easy handle and, for
/// CURLMSG_DONE, the transfer's result code. Returns 1 when `message` is a finished transfer.
int pushrelay_curl_msg_done(CURLMsg *message, CURL **easy, CURLcode *result);

/// Whether the linked libcurl was built with HTTP/2 (nghttp2) support.
int pushrelay_curl_has_http2(void);
/// The linked libcurl's version as 0xXXYYZZ (8.14.1 is 0x080e01).
unsigned int pushrelay_curl_version_number(void);

/// The linked libcurl's version string, e.g. "libcurl/7.88.1 OpenSSL/3.0.x nghttp2/1.52.0".
const char *pushrelay_curl_version(void);

#endif
