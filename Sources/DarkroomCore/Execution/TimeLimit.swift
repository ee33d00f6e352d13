import Foundation

extension PipelineExecutor {
  /// Runs `body`, failing with `timedOut` when it takes longer than `limit`.
  ///
  /// The limit holds even when `body` ignores cancellation — a user stage awaiting something that
  /// never comes, a C call stuck on a pool thread: `body` runs in a task of its own, and the caller
  /// is resumed by whichever comes first, the result or the deadline. On the deadline that task is
  /// cancelled and left to end by itself; whatever it returns later is dropped. Cancelling the
  /// caller ends the wait at once the same way, with `CancellationError`.
  static func withTimeout<T: Sendable>(
    _ limit: Duration?, source: String?, what: String = "the operation", _ body: @escaping @Sendable () async throws -> T
  ) async throws -> T {
    guard let limit else { return try await body() }
    let race = TimeLimitRace<T>()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        race.start(
          continuation,
          work: Task {
            do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
          },
          timer: Task {
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled else { return }
            race.finish(
              .failure(PipelineError(.timedOut, "\(what) took longer than its \(limit) time limit", source: source)))
          })
      }
    } onCancel: {
      race.finish(.failure(CancellationError()))
    }
  }
}

/// The first of a result, a deadline and a cancellation resumes the waiter; the other two are
/// ignored, and the work and the timer are cancelled.
private final class TimeLimitRace<T: Sendable>: Sendable {
  private struct State {
    var continuation: CheckedContinuation<T, any Error>?
    var early: Result<T, any Error>?  // finished before `start` (cancelled before it began)
    var tasks: [Task<Void, Never>] = []
    var done = false
  }
  private let state = Protected(State())

  func start(_ continuation: CheckedContinuation<T, any Error>, work: Task<Void, Never>, timer: Task<Void, Never>) {
    let early = state.withLock { state -> Result<T, any Error>? in
      if let early = state.early { return early }
      state.continuation = continuation
      state.tasks = [work, timer]
      return nil
    }
    guard let early else { return }
    work.cancel()
    timer.cancel()
    continuation.resume(with: early)
  }

  func finish(_ result: Result<T, any Error>) {
    let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
      guard !state.done else { return (nil, []) }
      state.done = true
      guard let continuation = state.continuation else {
        state.early = result
        return (nil, [])
      }
      defer {
        state.continuation = nil
        state.tasks = []
      }
      return (continuation, state.tasks)
    }
    for task in tasks { task.cancel() }
    continuation?.resume(with: result)
  }
}
