#define DR_LIBRARY_TABLE_ONLY
#include "library.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

_Atomic(const DrLibrary *) dr_library_table = NULL;

static DrLibrary dr_library_storage;
static char dr_library_failure[512];
static pthread_once_t dr_library_once = PTHREAD_ONCE_INIT;

/* libvips' file name: libtool's major version is CURRENT - AGE (42 for every 8.x). */
static void dr_library_name(char *name, size_t size) {
#ifdef __APPLE__
  snprintf(name, size, "libvips.%d.dylib", VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
#else
  snprintf(name, size, "libvips.so.%d", VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
#endif
}

static void dr_library_load(void) {
  char name[64];
  dr_library_name(name, sizeof name);
  void *handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char *reason = dlerror();
    snprintf(dr_library_failure, sizeof dr_library_failure, "%s could not be loaded: %s (install libvips: apt-get install libvips42)",
             name, reason ? reason : "no reason given");
    return;
  }
  DrLibrary table;
  memset(&table, 0, sizeof table);
  const char *missing = NULL;
  /* The object-pointer-to-function-pointer conversion is what dlsym(3) is for (POSIX). */
#define DR_LIBRARY_RESOLVE(symbol)                                                                                   \
  if (!missing) {                                                                                                    \
    table.symbol = (__typeof__(table.symbol))dlsym(handle, #symbol);                                                 \
    if (!table.symbol) missing = #symbol;                                                                            \
  }
  DR_LIBRARY_SYMBOLS(DR_LIBRARY_RESOLVE)
#undef DR_LIBRARY_RESOLVE
  if (missing) {
    /* The handle stays open: something in it may have started threads or registered types. */
    snprintf(dr_library_failure, sizeof dr_library_failure, "%s has no %s: Darkroom needs libvips %d.%d or later", name,
             missing, VIPS_MAJOR_VERSION, VIPS_MINOR_VERSION);
    return;
  }
  dr_library_storage = table;
  atomic_store_explicit(&dr_library_table, &dr_library_storage, memory_order_release);
}

const DrLibrary *dr_library_open(void) {
  pthread_once(&dr_library_once, dr_library_load);
  return atomic_load_explicit(&dr_library_table, memory_order_acquire);
}

const char *dr_library_error(void) { return dr_library_failure; }
