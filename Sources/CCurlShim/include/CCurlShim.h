// Typed, fixed-arity wrappers for libcurl's varargs API (curl_easy_setopt, curl_easy_getinfo,
// curl_multi_setopt), which Swift cannot call, plus small helpers for structures Swift reads
// awkwardly (CURLMsg's union, struct curl_sockaddr).
//
// Ownership: a CURL* from dr_easy_new and a CURLM* from dr_multi_new belong to the caller
// (dr_easy_cleanup; the multi handle lives as long as the process). Strings passed to dr_setopt_string are copied by
// libcurl. Pointers passed with dr_setopt_pointer (write/header/progress/socket user data, the
// error buffer, header lists) must stay valid until the handle is cleaned up: the Swift side keeps
// them in the transfer object that owns the handle. Strings from dr_getinfo_string belong to the
// handle and are valid until it is cleaned up or reused; copy them at once.
#ifndef DARKROOM_CCURLSHIM_H
#define DARKROOM_CCURLSHIM_H

#include <curl/curl.h>
#include <stddef.h>

// Opens libcurl (nothing links it: see Docs/CInterop.md) and runs
// curl_global_init(CURL_GLOBAL_ALL); call once per process before anything else. Returns
// CURLE_FAILED_INIT when libcurl could not be opened, and dr_curl_open_failure() says why.
CURLcode dr_global_init(void);
const char *dr_curl_open_failure(void);

// libcurl's plain functions, for Swift, which cannot call through the table.
const char *dr_curl_version(void);
// curl_easy_strerror; a fixed text while libcurl is not open.
const char *dr_curl_strerror(CURLcode code);
void dr_easy_cleanup(CURL *easy);
struct curl_slist *dr_slist_append(struct curl_slist *list, const char *line);
void dr_slist_free_all(struct curl_slist *list);
// curl_multi_init; NULL while libcurl is not open.
CURLM *dr_multi_new(void);
CURLMcode dr_multi_add(CURLM *multi, CURL *easy);
CURLMcode dr_multi_remove(CURLM *multi, CURL *easy);
CURLMcode dr_multi_perform(CURLM *multi, int *running);
// curl_multi_poll with no extra descriptors.
CURLMcode dr_multi_poll(CURLM *multi, int timeout_ms);
CURLMcode dr_multi_wakeup(CURLM *multi);

// A new easy handle with defaults every Darkroom transfer wants (no signals: threads).
CURL *dr_easy_new(void);

CURLcode dr_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode dr_setopt_off(CURL *easy, CURLoption option, curl_off_t value);
CURLcode dr_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode dr_setopt_pointer(CURL *easy, CURLoption option, void *value);
// A blob option (CURLOPT_CAINFO_BLOB…): libcurl copies the `count` bytes (CURL_BLOB_COPY), so the
// caller's buffer need not outlive the call.
CURLcode dr_setopt_blob(CURL *easy, CURLoption option, const void *bytes, size_t count);

// Callback setters (each also sets the matching user-data pointer).
typedef size_t (*dr_data_callback)(char *data, size_t size, size_t count, void *user);
typedef int (*dr_progress_callback)(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
typedef curl_socket_t (*dr_opensocket_callback)(void *user, curlsocktype purpose, struct curl_sockaddr *address);
CURLcode dr_set_write_callback(CURL *easy, dr_data_callback callback, void *user);
CURLcode dr_set_header_callback(CURL *easy, dr_data_callback callback, void *user);
CURLcode dr_set_progress_callback(CURL *easy, dr_progress_callback callback, void *user);
CURLcode dr_set_opensocket_callback(CURL *easy, dr_opensocket_callback callback, void *user);
// Called before every request, on a new connection or a reused one (CURLOPT_PREREQFUNCTION,
// libcurl 7.80): the address connected to as text. Returns CURL_PREREQFUNC_OK or
// CURL_PREREQFUNC_ABORT.
typedef int (*dr_prereq_callback)(void *user, char *primary_ip, char *local_ip, int primary_port, int local_port);
CURLcode dr_set_prereq_callback(CURL *easy, dr_prereq_callback callback, void *user);

CURLcode dr_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode dr_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value);
CURLcode dr_getinfo_string(CURL *easy, CURLINFO info, const char **value);

CURLMcode dr_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

// Takes the next finished transfer from the multi handle: returns 1 and fills `easy` and
// `result` when there is one, 0 when there is none.
int dr_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result);

// The raw address a socket is about to connect to: copies 4 (IPv4) or 16 (IPv6) bytes into `out`
// and returns that length; returns 0 for other families.
int dr_sockaddr_bytes(const struct curl_sockaddr *address, unsigned char out[16]);

// Opens the socket libcurl asked for (what libcurl does when no callback is set).
curl_socket_t dr_open_socket(const struct curl_sockaddr *address);

#endif
