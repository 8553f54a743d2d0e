#define _GNU_SOURCE  /* pthread_setname_np */
#include "CCurlShim.h"

#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <pthread.h>
#include <openssl/ssl.h>

CURLcode pushrelay_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pushrelay_curl_easy_setopt_ptr(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pushrelay_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pushrelay_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pushrelay_curl_easy_setopt_write_callback(CURL *handle,
    size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode pushrelay_curl_easy_setopt_header_callback(CURL *handle,
    size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

int pushrelay_curl_msg_done(CURLMsg *message, CURL **easy, CURLcode *result) {
    if (message == NULL || message->msg != CURLMSG_DONE) return 0;
    *easy = message->easy_handle;
    *result = message->data.result;
    return 1;
}

CURLcode pushrelay_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode pushrelay_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLMcode pushrelay_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

CURLMcode pushrelay_curl_multi_setopt_ptr(CURLM *handle, CURLMoption option, void *value) {
    return curl_multi_setopt(handle, option, value);
}

int pushrelay_curl_has_http2(void) {
    curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return (info->features & CURL_VERSION_HTTP2) != 0;
}

const char *pushrelay_curl_version(void) {
    return curl_version();
}

unsigned int pushrelay_curl_version_number(void) {
    return curl_version_info(CURLVERSION_NOW)->version_num;
}

CURLcode pushrelay_curl_easy_setopt_socket_callbacks(CURL *handle, void *clientp,
    int (*opened)(void *, curl_socket_t, curlsocktype),
    int (*closing)(void *, curl_socket_t)) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, opened);
    if (code == CURLE_OK) code = curl_easy_setopt(handle, CURLOPT_SOCKOPTDATA, clientp);
    if (code == CURLE_OK) code = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, closing);
    if (code == CURLE_OK) code = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, clientp);
    return code;
}

int pushrelay_tcp_cork(curl_socket_t socket, int on) {
#ifdef TCP_CORK
    return setsockopt(socket, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
#else
    (void)socket;
    (void)on;
    return 0;
#endif
}

struct curl_slist *pushrelay_slist_from_lines(const char *lines, size_t length, size_t count) {
    // One block: `count` list nodes, then a copy of the lines they point into.
    if (count == 0) return NULL;
    struct curl_slist *nodes = malloc(count * sizeof(struct curl_slist) + length);
    if (nodes == NULL) return NULL;
    char *text = (char *)(nodes + count);
    memcpy(text, lines, length);
    size_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        nodes[i].data = text + offset;
        nodes[i].next = i + 1 < count ? &nodes[i + 1] : NULL;
        offset += strnlen(text + offset, length - offset) + 1;
        if (offset > length) {
            free(nodes);
            return NULL;
        }
    }
    return nodes;
}

// Read-ahead. Without it OpenSSL reads each TLS record with two recv() calls (header, then body),
// and an HTTP/2 response is often several records (a server may write each frame as one). With
// it, one recv() takes what the socket holds.
// The catch: bytes OpenSSL has read but not yet decrypted are invisible to poll() and to
// SSL_pending(), which is all curl asks. When a transfer's stream ends mid-buffer, curl stops
// reading and the records behind it (other streams' responses) would wait for the next packet.
// So every connection with read-ahead is registered in its event loop's set, and the loop asks
// SSL_has_pending() of each before it sleeps. An SSL leaves the set when OpenSSL frees it.

struct pushrelay_tls_set {
    SSL **items;
    size_t count;
    size_t capacity;
};

static int pushrelay_ssl_index = -1;
static int pushrelay_ctx_index = -1;
static pthread_once_t pushrelay_index_once = PTHREAD_ONCE_INIT;

static void pushrelay_tls_forget(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                                 void *argp) {
    (void)ad; (void)idx; (void)argl; (void)argp;
    struct pushrelay_tls_set *set = ptr;
    if (set == NULL) return;
    for (size_t i = 0; i < set->count; i++) {
        if (set->items[i] == parent) {
            set->items[i] = set->items[--set->count];
            return;
        }
    }
}

static void pushrelay_make_indexes(void) {
    pushrelay_ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, pushrelay_tls_forget);
    pushrelay_ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static void pushrelay_tls_info(const SSL *constant, int where, int ret) {
    (void)ret;
    if (!(where & SSL_CB_HANDSHAKE_DONE)) return;
    SSL *ssl = (SSL *)constant;
    // Already registered: with TLS 1.3 each session ticket ends a "handshake" again.
    if (SSL_get_ex_data(ssl, pushrelay_ssl_index) != NULL) return;
    struct pushrelay_tls_set *set = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), pushrelay_ctx_index);
    if (set == NULL) return;
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? set->capacity * 2 : 8;
        SSL **items = realloc(set->items, capacity * sizeof(SSL *));
        if (items == NULL) {
            // Untracked: turn read-ahead off for this connection (what is already buffered is
            // still read by the next transfer that reads it).
            SSL_set_read_ahead(ssl, 0);
            return;
        }
        set->items = items;
        set->capacity = capacity;
    }
    if (!SSL_set_ex_data(ssl, pushrelay_ssl_index, set)) {
        SSL_set_read_ahead(ssl, 0);
        return;
    }
    set->items[set->count++] = ssl;
}

static CURLcode pushrelay_ssl_ctx_read_ahead(CURL *handle, void *ssl_ctx, void *clientp) {
    (void)handle;
    SSL_CTX *context = ssl_ctx;
    // No set to register in (its allocation failed), or no indexes: no read-ahead either.
    if (clientp == NULL || pushrelay_ssl_index < 0 || pushrelay_ctx_index < 0) return CURLE_OK;
    if (!SSL_CTX_set_ex_data(context, pushrelay_ctx_index, clientp)) return CURLE_OK;
    SSL_CTX_set_info_callback(context, pushrelay_tls_info);
    SSL_CTX_set_read_ahead(context, 1);
    return CURLE_OK;
}

struct pushrelay_tls_set *pushrelay_tls_set_create(void) {
    pthread_once(&pushrelay_index_once, pushrelay_make_indexes);
    return calloc(1, sizeof(struct pushrelay_tls_set));
}

void pushrelay_tls_set_free(struct pushrelay_tls_set *set) {
    if (set == NULL) return;
    free(set->items);
    free(set);
}

size_t pushrelay_tls_set_count(const struct pushrelay_tls_set *set) {
    return set == NULL ? 0 : set->count;
}

int pushrelay_tls_set_pending(const struct pushrelay_tls_set *set) {
    if (set == NULL) return 0;
    for (size_t i = 0; i < set->count; i++) {
        if (SSL_has_pending(set->items[i])) return 1;
    }
    return 0;
}

CURLcode pushrelay_curl_easy_setopt_read_ahead(CURL *handle, struct pushrelay_tls_set *set) {
    CURLcode code =
        curl_easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, pushrelay_ssl_ctx_read_ahead);
    if (code == CURLE_OK) code = curl_easy_setopt(handle, CURLOPT_SSL_CTX_DATA, set);
    return code;
}

void pushrelay_name_this_thread(const char *name) {
    pthread_setname_np(pthread_self(), name);
}
