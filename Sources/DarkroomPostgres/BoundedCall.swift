import DarkroomCore

/// The first of a call's result, its time limit and its caller's cancellation, whichever comes
/// first; the call itself may go on (a query postgres-nio has sent does not stop when its task is
/// cancelled) but nobody waits for it.
final class BoundedCall<T: Sendable>: Sendable {
  private let state = Protected<(result: Result<T, any Error>?, waiter: CheckedContinuation<Result<T, any Error>, Never>?)>(
    (nil, nil))

  /// Settles the call with `result`, unless it is settled already.
  func finish(_ result: Result<T, any Error>) {
    let waiter = state.withLock { state -> CheckedContinuation<Result<T, any Error>, Never>? in
      guard state.result == nil else { return nil }
      state.result = result
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: result)
  }

  /// The result, once settled.
  func value() async -> Result<T, any Error> {
    await withCheckedContinuation { continuation in
      let settled = state.withLock { state -> Result<T, any Error>? in
        if let result = state.result { return result }
        state.waiter = continuation
        return nil
      }
      if let settled { continuation.resume(returning: settled) }
    }
  }

  /// Runs `body`, answering within `timeout` with `timedOut` when it has not answered, and at
  /// once with `CancellationError` when the caller is cancelled.
  static func run(timeout: Duration, timedOut: PipelineError, _ body: @escaping @Sendable () async throws -> T) async -> Result<
    T, any Error
  > {
    let call = BoundedCall<T>()
    let work = Task {
      do {
        call.finish(.success(try await body()))
      } catch {
        call.finish(.failure(error))
      }
    }
    let timer = Task {
      try? await Task.sleep(for: timeout)
      call.finish(.failure(timedOut))
    }
    let result = await withTaskCancellationHandler {
      await call.value()
    } onCancel: {
      call.finish(.failure(CancellationError()))
    }
    timer.cancel()
    work.cancel()
    return result
  }
}
