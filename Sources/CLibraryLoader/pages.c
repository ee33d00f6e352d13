// The program's own read-only pages, let go once start-up is over (ProgramPages in DarkroomCore).
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "CLibraryLoader.h"

#ifdef __linux__
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int dr_program_pages_visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  size_t *released = data;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return 1;
  for (int index = 0; index < info->dlpi_phnum; index++) {
    const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
    /* Only segments that are never written: their pages are the file's, read again from the page
     * cache when next touched. A writable one holds relocated pointers and data. */
    if (segment->p_type != PT_LOAD || (segment->p_flags & PF_W) || segment->p_filesz != segment->p_memsz) continue;
    uintptr_t start = (uintptr_t)(info->dlpi_addr + segment->p_vaddr);
    uintptr_t end = start + (uintptr_t)segment->p_filesz;
    start = (start + (uintptr_t)page - 1) & ~((uintptr_t)page - 1); /* whole pages inside the segment */
    end &= ~((uintptr_t)page - 1);
    if (end > start && madvise((void *)start, end - start, MADV_DONTNEED) == 0) *released += end - start;
  }
  return 1; /* the first object visited is the program itself: stop there */
}

/* Whether a debugger (or strace, ltrace) is attached: its breakpoints are written into private
 * copies of code pages, which MADV_DONTNEED would throw away. From TracerPid in
 * /proc/self/status; without /proc, no. */
static int dr_traced(void) {
  int descriptor = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return 0;
  char text[4096];
  ssize_t length = read(descriptor, text, sizeof text - 1);
  close(descriptor);
  if (length <= 0) return 0;
  text[length] = 0;
  const char *field = strstr(text, "\nTracerPid:");
  if (!field) return 0;
  field += strlen("\nTracerPid:");
  while (*field == ' ' || *field == '\t') field++;
  return *field != '0';
}
#endif

size_t dr_release_program_pages(void) {
  size_t released = 0;
#ifdef __linux__
  if (dr_traced()) return 0;
  dl_iterate_phdr(dr_program_pages_visit, &released);
#endif
  return released;
}
