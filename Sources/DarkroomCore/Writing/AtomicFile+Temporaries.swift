import Foundation

#if canImport(Glibc)
  import Glibc
#endif

extension AtomicFile {
  /// The temporary files being written right now, so that a process stopping early can remove
  /// them (``removeTemporaries()``) instead of leaving temporary files beside its outputs (`.darkroom-N.tmp`).
  static let inProgress = Protected<Set<String>>([])

  /// Removes every temporary file a write in this process has not finished yet; returns how many.
  /// The runner calls it when it is stopped by a signal before its writes end.
  ///
  /// ```swift
  /// AtomicFile.removeTemporaries()
  /// exit(130)
  /// ```
  @discardableResult
  public static func removeTemporaries() -> Int {
    let paths = inProgress.withLock { paths -> Set<String> in
      defer { paths = [] }
      return paths
    }
    return paths.filter { unlink($0) == 0 }.count
  }
}
