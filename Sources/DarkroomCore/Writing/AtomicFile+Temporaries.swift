import Foundation

#if canImport(Glibc)
  import Glibc
#endif

extension AtomicFile {
  /// The temporary files being written right now, so that a process stopping early can remove
  /// them (``removeTemporaries()``) instead of leaving temporary files beside its outputs (`.darkroom-N.tmp`).
  /// `closed` once a process about to exit has removed them for good (``removeTemporaries(forGood:)``):
  /// no new temporary file is made after that.
  static let inProgress = Protected<(paths: Set<String>, closed: Bool)>(([], false))

  /// The unnamed files being written right now, by a number of their own: `true` once
  /// ``removeTemporaries()`` has stopped them, so that each is never linked in (or is taken back
  /// when the stop came during its link), as a temporary file removed before its rename never
  /// appears. Writes that begin after the stop (the run's report) are not affected.
  static let unnamedInProgress = Protected<(next: UInt64, stopped: [UInt64: Bool], closed: Bool)>((0, [:], false))

  /// Registers an unnamed write; returns its number. After ``removeTemporaries(forGood:)`` with
  /// `forGood`, every new write is stopped from the start.
  static func beginUnnamed() -> UInt64 {
    unnamedInProgress.withLock { state in
      state.next += 1
      state.stopped[state.next] = state.closed
      return state.next
    }
  }

  /// Makes the temporary file `name` in `folder` and registers it as `registered`, in one step
  /// under the registry's lock, so that ``removeTemporaries(forGood:)`` never misses a file made
  /// while it runs. Returns the descriptor, or the errno; `ECANCELED` once closed for good.
  static func createTemporary(_ name: String, in folder: Int32, registered: String) -> (descriptor: Int32, errno: Int32) {
    inProgress.withLock { state in
      guard !state.closed else { return (-1, ECANCELED) }
      let descriptor = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
      guard descriptor >= 0 else { return (-1, errno) }
      state.paths.insert(registered)
      return (descriptor, 0)
    }
  }

  /// Whether the unnamed write `number` was stopped.
  static func isStopped(_ number: UInt64) -> Bool { unnamedInProgress.withLock { $0.stopped[number] ?? false } }

  /// Forgets the unnamed write `number`.
  static func endUnnamed(_ number: UInt64) { unnamedInProgress.withLock { _ = $0.stopped.removeValue(forKey: number) } }

  /// Removes every temporary file a write in this process has not finished yet, and stops every
  /// unnamed file from being linked in; returns how many.
  /// The runner calls it when it is stopped by a signal before its writes end. With `forGood`
  /// (the process exits right after) writes that start later make no file either: a write
  /// thread still running would otherwise leave a temporary file behind the exit.
  ///
  /// ```swift
  /// AtomicFile.removeTemporaries(forGood: true)
  /// _exit(130)
  /// ```
  @discardableResult
  public static func removeTemporaries(forGood: Bool = false) -> Int {
    let stopped = unnamedInProgress.withLock { state -> Int in
      if forGood { state.closed = true }
      for number in state.stopped.keys { state.stopped[number] = true }
      return state.stopped.count
    }
    let paths = inProgress.withLock { state -> Set<String> in
      if forGood { state.closed = true }
      defer { state.paths = [] }
      return state.paths
    }
    return stopped + paths.filter { unlink($0) == 0 }.count
  }
}
