// System calls DarkroomCore needs that Swift cannot call directly (syscall(2) is variadic).
#pragma once

#include <errno.h>
#include <stdint.h>

#ifdef __linux__
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437  // the same number on every architecture (Linux 5.6)
#endif
#endif

// O_PATH (not exported to Swift without _GNU_SOURCE); the same value on x86-64 and arm64.
#define DR_O_PATH 010000000

// openat2(2) resolve flags.
#define DR_RESOLVE_NO_MAGICLINKS 0x02
#define DR_RESOLVE_NO_SYMLINKS 0x04
#define DR_RESOLVE_BENEATH 0x08

/// openat2(2): opens `path` relative to `dirfd` with `flags`, resolving it under the rules of
/// `resolve` (DR_RESOLVE_*). Returns the descriptor, or -1 with errno set (ENOSYS where the
/// kernel is older than 5.6 or a sandbox hides the call).
static inline int dr_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
#ifdef __linux__
  struct open_how how = {0};
  how.flags = flags;
  how.mode = 0;
  how.resolve = resolve;
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
#else
  (void)dirfd;
  (void)path;
  (void)flags;
  (void)resolve;
  errno = ENOSYS;
  return -1;
#endif
}

/// renameat2(2) with RENAME_EXCHANGE: atomically swaps two paths (tests use it to race folders
/// against symlinks). Returns 0, or -1 with errno set.
static inline int dr_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
#ifdef __linux__
  return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 2 /* RENAME_EXCHANGE */);
#else
  (void)olddirfd;
  (void)oldpath;
  (void)newdirfd;
  (void)newpath;
  errno = ENOSYS;
  return -1;
#endif
}

#ifdef __linux__
#include <spawn.h>
// glibc 2.34's posix_spawn_file_actions_addclosefrom_np (not exported to Swift without _GNU_SOURCE).
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
#endif

/// Adds to `actions` the closing of every descriptor from `from` up, in the spawned child (the
/// tests' PostgreSQL servers must not keep the test process's pipes open). Returns 0, or an
/// error number.
static inline int dr_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
#ifdef __linux__
  return posix_spawn_file_actions_addclosefrom_np(actions, from);
#else
  (void)actions;
  (void)from;
  return ENOSYS;
#endif
}

#ifdef __linux__
#include <fcntl.h>
#endif

/// openat(2) with O_TMPFILE (not exported to Swift without _GNU_SOURCE): an unnamed regular file
/// in the directory `dirfd`, open for writing, to be linked in with linkat(2). Returns the
/// descriptor, or -1 with errno set (EOPNOTSUPP, EISDIR or EINVAL where the file system or the
/// kernel has no unnamed files).
static inline int dr_open_unnamed(int dirfd, unsigned int mode) {
#if defined(__linux__) && defined(__O_TMPFILE)
  return openat(dirfd, ".", __O_TMPFILE | O_DIRECTORY | O_WRONLY | O_CLOEXEC, mode);
#else
  (void)dirfd;
  (void)mode;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

/// open(2) with O_TMPFILE on a directory's path: an unnamed regular file in `directory`, open for
/// reading and writing (a fetched body written as it arrives, read back with pread(2), linked in
/// with linkat(2) when it is saved). Returns the descriptor, or -1 with errno set.
static inline int dr_open_unnamed_at_path(const char *directory, unsigned int mode) {
#if defined(__linux__) && defined(__O_TMPFILE)
  return open(directory, __O_TMPFILE | O_DIRECTORY | O_RDWR | O_CLOEXEC, mode);
#else
  (void)directory;
  (void)mode;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

#ifdef __linux__
#include <sys/prctl.h>
#endif

/// Names the calling thread for the kernel (`ps`, `perf`, /proc/self/task/N/comm): at most 15
/// bytes are kept. prctl(2) is variadic, so Swift cannot call it. Returns 0, or -1 with errno.
static inline int dr_name_this_thread(const char *name) {
#ifdef __linux__
  return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
#else
  (void)name;
  return 0;
#endif
}
