import CLibraryLoader

/// The starts of the libraries opened on first use (libvips, libcurl), as the process ends.
///
/// A library may be starting on another thread when the process exits: libcurl loads on a thread
/// of its own while a `run` parses its command line, and a pool thread may be starting libvips.
/// `exit()` runs its handlers last registered first, so a handler the start itself registered
/// (OpenSSL's cleanup, from `curl_global_init`) would run while that start goes on, and crash.
/// ``stopBeforeExit()`` waits for a start under way to end and keeps any other from beginning;
/// call it before `exit()`.
///
/// ```swift
/// LibraryStarts.stopBeforeExit()
/// exit(0)
/// ```
package enum LibraryStarts {
  /// Waits for a library start under way on another thread, then lets none begin.
  package static func stopBeforeExit() { dr_library_stop_starts() }
}
