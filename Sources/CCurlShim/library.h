// libcurl, reached through one table that dlopen(3) fills on first use (private to CCurlShim, as
// Sources/CVipsShim/library.h is for libvips; see Docs/CInterop.md).
//
// libcurl links about twenty shared libraries (OpenSSL, GnuTLS's kin, Kerberos, LDAP, libssh2,
// nghttp2…): binding them costs every process start ~4 ms, which a run over local files, a cached
// rerun, validate or --help has no use for. The first HTTP transfer opens libcurl.so.4 (its
// soname since 2006) and resolves the functions below; each name is a macro for its table entry.
// A function used without an entry is a link error, since nothing links libcurl.
#ifndef DARKROOM_CCURLSHIM_LIBRARY_H
#define DARKROOM_CCURLSHIM_LIBRARY_H

#include <curl/curl.h>
#include <stdatomic.h>

#define DR_CURL_SYMBOLS(X)                                                                                           \
  X(curl_global_init) X(curl_version) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt)                     \
  X(curl_easy_getinfo) X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all) X(curl_multi_init)          \
  X(curl_multi_setopt) X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_perform)                    \
  X(curl_multi_poll) X(curl_multi_wakeup) X(curl_multi_info_read)

typedef struct {
#define DR_CURL_FIELD(name) __typeof__(name) *name;
  DR_CURL_SYMBOLS(DR_CURL_FIELD)
#undef DR_CURL_FIELD
} DrCurlLibrary;

/* The filled table once libcurl is open, NULL before (and after a failed open). */
extern _Atomic(const DrCurlLibrary *) dr_curl_table;

/* Opens libcurl and fills the table, once. NULL when that failed; dr_curl_open_failure() says why. */
const DrCurlLibrary *dr_curl_open(void);

/* The table; dr_global_init opens it first, and every other entry point runs after it succeeded. */
static inline const DrCurlLibrary *dr_curl(void) {
  const DrCurlLibrary *table = atomic_load_explicit(&dr_curl_table, memory_order_acquire);
  return table ? table : dr_curl_open();
}

/* library.c fills the table by these names, and defines DR_CURL_TABLE_ONLY to see them. With GCC,
 * curl.h makes the varargs functions type-checking macros: these replace them. */
#ifndef DR_CURL_TABLE_ONLY
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init (dr_curl()->curl_global_init)
#define curl_version (dr_curl()->curl_version)
#define curl_easy_init (dr_curl()->curl_easy_init)
#define curl_easy_cleanup (dr_curl()->curl_easy_cleanup)
#define curl_easy_setopt (dr_curl()->curl_easy_setopt)
#define curl_easy_getinfo (dr_curl()->curl_easy_getinfo)
#define curl_easy_strerror (dr_curl()->curl_easy_strerror)
#define curl_slist_append (dr_curl()->curl_slist_append)
#define curl_slist_free_all (dr_curl()->curl_slist_free_all)
#define curl_multi_init (dr_curl()->curl_multi_init)
#define curl_multi_setopt (dr_curl()->curl_multi_setopt)
#define curl_multi_add_handle (dr_curl()->curl_multi_add_handle)
#define curl_multi_remove_handle (dr_curl()->curl_multi_remove_handle)
#define curl_multi_perform (dr_curl()->curl_multi_perform)
#define curl_multi_poll (dr_curl()->curl_multi_poll)
#define curl_multi_wakeup (dr_curl()->curl_multi_wakeup)
#define curl_multi_info_read (dr_curl()->curl_multi_info_read)
#endif

#endif
