#include "CCurlShim.h"

#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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
