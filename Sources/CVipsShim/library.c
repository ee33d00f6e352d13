#define DR_LIBRARY_TABLE_ONLY
#include "library.h"

#include "CLibraryLoader.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

_Atomic(const DrLibrary *) dr_library_table = NULL;

static DrLibrary dr_library_storage;
static char dr_library_failure[512];
static pthread_once_t dr_vips_once = PTHREAD_ONCE_INIT;

#define DR_LIBRARY_NAME(symbol) #symbol,
static const char *const dr_library_names[] = {DR_LIBRARY_SYMBOLS(DR_LIBRARY_NAME)};
#undef DR_LIBRARY_NAME
enum { DR_LIBRARY_COUNT = sizeof dr_library_names / sizeof dr_library_names[0] };

static void dr_library_load(void) {
  /* libvips' file name: libtool's major version is CURRENT - AGE (42 for every 8.x). */
  char name[64];
#ifdef __APPLE__
  snprintf(name, sizeof name, "libvips.%d.dylib", VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
#else
  snprintf(name, sizeof name, "libvips.so.%d", VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
#endif
  char hint[128];
  snprintf(hint, sizeof hint, "Darkroom needs libvips %d.%d or later and the libraries it links: apt-get install libvips42",
           VIPS_MAJOR_VERSION, VIPS_MINOR_VERSION);
  void *addresses[DR_LIBRARY_COUNT];
  if (dr_library_resolve(name, hint, dr_library_names, addresses, DR_LIBRARY_COUNT, dr_library_failure,
                         sizeof dr_library_failure) != 0)
    return;
  /* The object-pointer-to-function-pointer conversion is what dlsym(3) is for (POSIX). */
  size_t index = 0;
#define DR_LIBRARY_ASSIGN(symbol) dr_library_storage.symbol = (__typeof__(dr_library_storage.symbol))addresses[index++];
  DR_LIBRARY_SYMBOLS(DR_LIBRARY_ASSIGN)
#undef DR_LIBRARY_ASSIGN
  atomic_store_explicit(&dr_library_table, &dr_library_storage, memory_order_release);
}

const DrLibrary *dr_library_open(void) {
  const DrLibrary *table = atomic_load_explicit(&dr_library_table, memory_order_acquire);
  if (table) return table;
  if (dr_library_once(&dr_vips_once, dr_library_load) != 0) return NULL;
  return atomic_load_explicit(&dr_library_table, memory_order_acquire);
}

const char *dr_library_error(void) { return dr_library_failure; }
