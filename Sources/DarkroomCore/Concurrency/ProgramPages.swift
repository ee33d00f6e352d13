import CLibraryLoader

/// The program's own pages of code and read-only data.
///
/// A run touches much of the executable while it starts (the command line, the pipeline file,
/// the input list) and a smaller part while it processes images. The kernel keeps every page it
/// touched resident, mapped 64 KB at a time (fault-around), so start-up code counts towards the
/// peak memory of the image work that follows. ``release()`` drops those mappings; the pages
/// the work needs are mapped again, from the page cache, as it touches them.
///
/// ```swift
/// let released = ProgramPages.release()  // once start-up is done, before the images
/// ```
package enum ProgramPages {
  /// Lets go of the resident pages of the executable's read-only segments (code, constants,
  /// unwinding tables): `madvise(MADV_DONTNEED)`, never on a writable segment, so nothing is
  /// lost. Returns the bytes of address range let go (0 where this is not Linux). Nothing is let
  /// go while a debugger or another tracer is attached (`TracerPid`), whose breakpoints live in
  /// private copies of code pages; probes placed without attaching (uprobes: `perf probe`,
  /// bpftrace) are dropped with the pages.
  @discardableResult
  package static func release() -> Int { Int(dr_release_program_pages()) }
}
