#include "CLibraryLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t dr_start_lock;
static int dr_exiting; /* read and written under dr_start_lock */

static void dr_library_close(void) {
  pthread_mutex_lock(&dr_start_lock);
  dr_exiting = 1;
  pthread_mutex_unlock(&dr_start_lock);
}

/* Before main(), so that the hook is registered after the loader's own (atexit handlers run in
 * reverse order: this one runs first) and before any thread can begin a start. */
__attribute__((constructor)) static void dr_library_prepare(void) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  /* Recursive: dr_init holds it while libvips opens, and a thread that calls exit() inside a
   * start must not wait for itself. */
  pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&dr_start_lock, &attributes);
  pthread_mutexattr_destroy(&attributes);
  atexit(dr_library_close);
}

void dr_library_stop_starts(void) { dr_library_close(); }

int dr_library_enter(void) {
  pthread_mutex_lock(&dr_start_lock);
  if (!dr_exiting) return 0;
  pthread_mutex_unlock(&dr_start_lock);
  return -1;
}

void dr_library_leave(void) { pthread_mutex_unlock(&dr_start_lock); }

int dr_library_once(pthread_once_t *once, void (*load)(void)) {
  if (dr_library_enter() != 0) return -1;
  pthread_once(once, load);
  dr_library_leave();
  return 0;
}

int dr_library_resolve(const char *file, const char *hint, const char *const *names, void **addresses, size_t count,
                       char *failure, size_t failure_size) {
  if (dr_library_enter() != 0) {
    snprintf(failure, failure_size, "%s was not loaded: the process is exiting", file);
    return -1;
  }
  int result = 0;
  void *handle = dlopen(file, RTLD_LAZY | RTLD_GLOBAL);
  if (!handle) {
    const char *reason = dlerror();
    snprintf(failure, failure_size, "%s could not be loaded: %s (%s)", file, reason ? reason : "no reason given", hint);
    result = -1;
  }
  for (size_t index = 0; handle && index < count; index++) {
    addresses[index] = dlsym(handle, names[index]);
    if (!addresses[index]) {
      snprintf(failure, failure_size, "%s has no %s (%s)", file, names[index], hint);
      result = -1;
      break;
    }
  }
  dr_library_leave();
  return result;
}
