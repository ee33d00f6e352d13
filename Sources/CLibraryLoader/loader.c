#include "CLibraryLoader.h"

#include <dlfcn.h>
#include <stdio.h>

int dr_library_resolve(const char *file, const char *hint, const char *const *names, void **addresses, size_t count,
                       char *failure, size_t failure_size) {
  void *handle = dlopen(file, RTLD_LAZY | RTLD_GLOBAL);
  if (!handle) {
    const char *reason = dlerror();
    snprintf(failure, failure_size, "%s could not be loaded: %s (%s)", file, reason ? reason : "no reason given", hint);
    return -1;
  }
  for (size_t index = 0; index < count; index++) {
    addresses[index] = dlsym(handle, names[index]);
    if (!addresses[index]) {
      snprintf(failure, failure_size, "%s has no %s (%s)", file, names[index], hint);
      return -1;
    }
  }
  return 0;
}
