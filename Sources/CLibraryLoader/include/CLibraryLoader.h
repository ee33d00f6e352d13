// Opens a shared library on first use and resolves the functions a shim calls (used by CVipsShim
// for libvips and CCurlShim for libcurl; see Docs/CInterop.md).
#ifndef DARKROOM_CLIBRARYLOADER_H
#define DARKROOM_CLIBRARYLOADER_H

#include <stddef.h>

// dlopen(3)s `file` as the dynamic loader would have loaded it at start: RTLD_GLOBAL (what the
// library loads later sees it as if it were linked) and RTLD_LAZY (libraries built without
// -z now bind their functions on first call: RTLD_NOW cost ~7,000 more lookups, 2-4 ms) and resolves `count` names into `addresses`, from the library and its dependencies.
// Returns 0; or -1 with `failure` (of `failure_size` bytes) saying which step failed and, after
// `hint`, what to install. A library whose symbol is missing stays open: it may have started
// threads or registered types.
int dr_library_resolve(const char *file, const char *hint, const char *const *names, void **addresses, size_t count,
                       char *failure, size_t failure_size);

#endif
