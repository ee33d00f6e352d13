// Opens a shared library on first use and resolves the functions a shim calls (used by CVipsShim
// for libvips and CCurlShim for libcurl; see Docs/CInterop.md), and keeps library starts out of
// the way of exit().
#ifndef DARKROOM_CLIBRARYLOADER_H
#define DARKROOM_CLIBRARYLOADER_H

#include <pthread.h>
#include <stddef.h>

// Starts are serialised by one process-wide (recursive) lock, which exit() takes too: a hook
// registered with atexit(3) before main() waits there for a start under way on another thread
// (GLib aborts when the process is torn down while a thread registers libvips' types), then
// marks the process as exiting. From then on dr_library_enter fails: opening a library after
// exit() ran the loader's own exit handlers would run the constructors of GLib a second time
// (an abort). Returns 0 with the lock held (release it with dr_library_leave), or -1 when the
// process is exiting (the lock is not held).
int dr_library_enter(void);
void dr_library_leave(void);

// What the exit hook does, for a thread about to call exit(): waits for a start under way on
// another thread, then marks the process as exiting. Call it before exit() when a library may be
// starting: exit handlers a start registers itself (OpenSSL's, from curl_global_init) would run
// before the hook, while that start goes on (a crash).
void dr_library_stop_starts(void);

// Runs `load` once (pthread_once) under the start lock: a library's table is filled this way, so
// that every path takes the lock first and the once second. Returns 0, or -1 when the process is
// exiting (`load` did not run).
int dr_library_once(pthread_once_t *once, void (*load)(void));

// Under the start lock, dlopen(3)s `file` as the dynamic loader would have loaded it at start:
// RTLD_GLOBAL (what the library loads later sees it as if it were linked) and RTLD_LAZY
// (libraries built without -z now bind their functions on first call: RTLD_NOW cost ~7,000 more
// lookups, 2-4 ms), and resolves `count` names into `addresses`, from the library and its
// dependencies. Returns 0; or -1 with `failure` (of `failure_size` bytes) saying which step
// failed and, after `hint`, what to install. A library whose symbol is missing stays open: it
// may have started threads or registered types.
int dr_library_resolve(const char *file, const char *hint, const char *const *names, void **addresses, size_t count,
                       char *failure, size_t failure_size);

// Lets go of the program's resident pages of code and read-only data: madvise(2) MADV_DONTNEED
// on the executable's read-only PT_LOAD segments (never a writable one), so that the pages its
// start-up touched stop counting towards its resident memory; the pages later work touches are
// mapped again from the page cache. Nothing is let go while a tracer is attached (a debugger's
// breakpoints live in private copies of code pages). Returns the bytes of address range let go
// (0 off Linux, or when traced).
size_t dr_release_program_pages(void);

#endif
