#define DR_CURL_TABLE_ONLY
#include "library.h"

#include "CCurlShim.h"
#include "CLibraryLoader.h"

#include <pthread.h>

_Atomic(const DrCurlLibrary *) dr_curl_table = NULL;

static DrCurlLibrary dr_curl_storage;
static char dr_curl_failure[512];
static pthread_once_t dr_curl_once = PTHREAD_ONCE_INIT;

#define DR_CURL_NAME(symbol) #symbol,
static const char *const dr_curl_names[] = {DR_CURL_SYMBOLS(DR_CURL_NAME)};
#undef DR_CURL_NAME
enum { DR_CURL_COUNT = sizeof dr_curl_names / sizeof dr_curl_names[0] };

static void dr_curl_load(void) {
#ifdef __APPLE__
  const char *name = "libcurl.4.dylib";
#else
  const char *name = "libcurl.so.4"; /* libcurl's soname since 2006 */
#endif
  void *addresses[DR_CURL_COUNT];
  if (dr_library_resolve(name, "Darkroom needs libcurl 7.68 or later: apt-get install libcurl4", dr_curl_names, addresses,
                         DR_CURL_COUNT, dr_curl_failure, sizeof dr_curl_failure) != 0)
    return;
  /* The object-pointer-to-function-pointer conversion is what dlsym(3) is for (POSIX). */
  size_t index = 0;
#define DR_CURL_ASSIGN(symbol) dr_curl_storage.symbol = (__typeof__(dr_curl_storage.symbol))addresses[index++];
  DR_CURL_SYMBOLS(DR_CURL_ASSIGN)
#undef DR_CURL_ASSIGN
  atomic_store_explicit(&dr_curl_table, &dr_curl_storage, memory_order_release);
}

const DrCurlLibrary *dr_curl_open(void) {
  const DrCurlLibrary *table = atomic_load_explicit(&dr_curl_table, memory_order_acquire);
  if (table) return table;
  if (dr_library_once(&dr_curl_once, dr_curl_load) != 0) return NULL;
  return atomic_load_explicit(&dr_curl_table, memory_order_acquire);
}

const char *dr_curl_open_failure(void) { return dr_curl_failure; }
