import Foundation

#if canImport(Glibc)
  import Glibc
#endif

extension AtomicFile {
  /// The temporary files being written right now, so that a process stopping early can remove
  /// them (``removeTemporaries()``) instead of leaving temporary files beside its outputs (`.darkroom-N.tmp`).
  static let inProgress = Protected<Set<String>>([])

  /// The unnamed files being written right now, by a number of their own: `true` once
  /// ``removeTemporaries()`` has stopped them, so that each is never linked in (or is taken back
  /// when the stop came during its link), as a temporary file removed before its rename never
  /// appears. Writes that begin after the stop (the run's report) are not affected.
  static let unnamedInProgress = Protected<(next: UInt64, stopped: [UInt64: Bool])>((0, [:]))

  /// Registers an unnamed write; returns its number.
  static func beginUnnamed() -> UInt64 {
    unnamedInProgress.withLock { state in
      state.next += 1
      state.stopped[state.next] = false
      return state.next
    }
  }

  /// Whether the unnamed write `number` was stopped.
  static func isStopped(_ number: UInt64) -> Bool { unnamedInProgress.withLock { $0.stopped[number] ?? false } }

  /// Forgets the unnamed write `number`.
  static func endUnnamed(_ number: UInt64) { unnamedInProgress.withLock { _ = $0.stopped.removeValue(forKey: number) } }

  /// Removes every temporary file a write in this process has not finished yet, and stops every
  /// unnamed file from being linked in; returns how many.
  /// The runner calls it when it is stopped by a signal before its writes end.
  ///
  /// ```swift
  /// AtomicFile.removeTemporaries()
  /// exit(130)
  /// ```
  @discardableResult
  public static func removeTemporaries() -> Int {
    let stopped = unnamedInProgress.withLock { state -> Int in
      for number in state.stopped.keys { state.stopped[number] = true }
      return state.stopped.count
    }
    let paths = inProgress.withLock { paths -> Set<String> in
      defer { paths = [] }
      return paths
    }
    return stopped + paths.filter { unlink($0) == 0 }.count
  }
}
