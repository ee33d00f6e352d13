import Foundation

/// The moment a stage's work becomes visible outside its run (a written file renamed into
/// place), checked against the time limits around the stage and the stage's cancellation: an input
/// reported as timed out or cancelled never leaves a file behind.
///
/// The stage makes a point with ``current()`` in its own task, and cancels it from its
/// cancellation handler; its blocking work calls ``enter()`` just before the effect. `false` means
/// that the run has stopped (a time limit passed, or the stage was cancelled): the effect must not
/// happen. Once the point is entered, the time limits around the stage no longer stop it (what is
/// left is a rename), and the run reports what happened.
///
/// ```swift
/// let commit = CommitPoint.current()
/// try await withTaskCancellationHandler {
///   try await context.blocking { try AtomicFile.write(bytes, named: name, in: folder, commit: commit.enter) }
/// } onCancel: {
///   commit.cancel()
/// }
/// ```
///
/// (``StageContext/writeOutputFile(_:named:in:overwrite:)`` does this for the `write` and `save`
/// stages.)
package final class CommitPoint: Sendable {
  /// The time limits around the current task, innermost last (``PipelineExecutor/withTimeout``
  /// adds its own for the work it starts).
  @TaskLocal package static var limits: [any CommitGate] = []

  private enum State { case open, entered, refused }
  private let state = Protected(State.open)
  private let gates: [any CommitGate]

  private init(gates: [any CommitGate]) { self.gates = gates }

  /// A point checked against the time limits around the calling task.
  package static func current() -> CommitPoint { CommitPoint(gates: limits) }

  /// True when the effect may happen (and from now on must): no limit has stopped the stage and it
  /// was not cancelled. Asking again gives the same answer.
  package func enter() -> Bool {
    state.withLock { state in
      if state == .open { state = gates.allSatisfy { $0.letCommit() } ? .entered : .refused }
      return state == .entered
    }
  }

  /// The stage was cancelled: a later ``enter()`` refuses, unless it came first.
  package func cancel() { state.withLock { if $0 == .open { $0 = .refused } } }
}

/// A time limit's side of a ``CommitPoint``.
package protocol CommitGate: Sendable {
  /// True unless the limit has stopped its work already (or has passed); from then on the limit
  /// lets the work finish.
  func letCommit() -> Bool
}
