#include "CCurlShim.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "library.h"
#include "CLibraryLoader.h"

CURLcode dr_global_init(void) {
  if (!dr_curl_open()) return CURLE_FAILED_INIT;
  /* Kept out of exit()'s way like libvips' start (see dr_library_enter). */
  if (dr_library_enter() != 0) return CURLE_FAILED_INIT;
  CURLcode code = curl_global_init(CURL_GLOBAL_ALL);
  dr_library_leave();
  return code;
}

const char *dr_curl_version(void) { return curl_version(); }

const char *dr_curl_strerror(CURLcode code) {
  if (!atomic_load_explicit(&dr_curl_table, memory_order_acquire)) return "libcurl is not loaded";
  return curl_easy_strerror(code);
}

void dr_easy_cleanup(CURL *easy) { curl_easy_cleanup(easy); }
struct curl_slist *dr_slist_append(struct curl_slist *list, const char *line) { return curl_slist_append(list, line); }
void dr_slist_free_all(struct curl_slist *list) { curl_slist_free_all(list); }

CURLM *dr_multi_new(void) {
  if (!atomic_load_explicit(&dr_curl_table, memory_order_acquire)) return NULL;
  return curl_multi_init();
}

CURLMcode dr_multi_add(CURLM *multi, CURL *easy) { return curl_multi_add_handle(multi, easy); }
CURLMcode dr_multi_remove(CURLM *multi, CURL *easy) { return curl_multi_remove_handle(multi, easy); }
CURLMcode dr_multi_perform(CURLM *multi, int *running) { return curl_multi_perform(multi, running); }
CURLMcode dr_multi_poll(CURLM *multi, int timeout_ms) { return curl_multi_poll(multi, NULL, 0, timeout_ms, NULL); }
CURLMcode dr_multi_wakeup(CURLM *multi) { return curl_multi_wakeup(multi); }

CURL *dr_easy_new(void) {
  CURL *easy = curl_easy_init();
  if (easy) curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  return easy;
}

CURLcode dr_setopt_long(CURL *easy, CURLoption option, long value) { return curl_easy_setopt(easy, option, value); }
CURLcode dr_setopt_off(CURL *easy, CURLoption option, curl_off_t value) { return curl_easy_setopt(easy, option, value); }
CURLcode dr_setopt_string(CURL *easy, CURLoption option, const char *value) { return curl_easy_setopt(easy, option, value); }
CURLcode dr_setopt_pointer(CURL *easy, CURLoption option, void *value) { return curl_easy_setopt(easy, option, value); }
CURLcode dr_setopt_blob(CURL *easy, CURLoption option, const void *bytes, size_t count) {
  struct curl_blob blob = {(void *)bytes, count, CURL_BLOB_COPY};
  return curl_easy_setopt(easy, option, &blob);
}

CURLcode dr_set_write_callback(CURL *easy, dr_data_callback callback, void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
  return code ? code : curl_easy_setopt(easy, CURLOPT_WRITEDATA, user);
}

CURLcode dr_set_header_callback(CURL *easy, dr_data_callback callback, void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback);
  return code ? code : curl_easy_setopt(easy, CURLOPT_HEADERDATA, user);
}

CURLcode dr_set_progress_callback(CURL *easy, dr_progress_callback callback, void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback);
  if (!code) code = curl_easy_setopt(easy, CURLOPT_XFERINFODATA, user);
  return code ? code : curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
}

CURLcode dr_set_opensocket_callback(CURL *easy, dr_opensocket_callback callback, void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
  return code ? code : curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, user);
}

CURLcode dr_set_prereq_callback(CURL *easy, dr_prereq_callback callback, void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, callback);
  return code ? code : curl_easy_setopt(easy, CURLOPT_PREREQDATA, user);
}

CURLcode dr_getinfo_long(CURL *easy, CURLINFO info, long *value) { return curl_easy_getinfo(easy, info, value); }
CURLcode dr_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value) { return curl_easy_getinfo(easy, info, value); }
CURLcode dr_getinfo_string(CURL *easy, CURLINFO info, const char **value) {
  char *text = NULL;
  CURLcode code = curl_easy_getinfo(easy, info, &text);
  *value = text;
  return code;
}

CURLMcode dr_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }

int dr_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result) {
  int queued = 0;
  CURLMsg *message;
  while ((message = curl_multi_info_read(multi, &queued))) {
    if (message->msg == CURLMSG_DONE) {
      *easy = message->easy_handle;
      *result = message->data.result;
      return 1;
    }
  }
  return 0;
}

int dr_sockaddr_bytes(const struct curl_sockaddr *address, unsigned char out[16]) {
  if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&address->addr;
    memcpy(out, &v4->sin_addr, 4);
    return 4;
  }
  if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&address->addr;
    memcpy(out, &v6->sin6_addr, 16);
    return 16;
  }
  return 0;
}

curl_socket_t dr_open_socket(const struct curl_sockaddr *address) {
  return socket(address->family, address->socktype, address->protocol);
}
