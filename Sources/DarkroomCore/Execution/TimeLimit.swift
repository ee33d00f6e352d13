import Foundation

extension PipelineExecutor {
  /// How long a cancelled or timed-out body may take to wind down before the caller stops
  /// waiting for it. Cooperative work (a libcurl transfer taken off its loop, a pool call released
  /// on cancellation) ends in microseconds, so the caller sees it finished; work that ignores
  /// cancellation is abandoned after this and ends on its own.
  static let abandonAfter: Duration = .seconds(1)

  /// Runs `body`, failing with `timedOut` when it takes longer than `limit`.
  ///
  /// The limit holds even when `body` ignores cancellation — a user stage awaiting something that
  /// never comes, a C call stuck on a thread: `body` runs in a task of its own. At the deadline
  /// that task is cancelled, and the caller resumes with `timedOut` as soon as the body has ended,
  /// or ``abandonAfter`` later if it has not; whatever it returns after that is dropped.
  /// Cancelling the caller works the same way, with `CancellationError`. Deadlines live on the
  /// process's ``DeadlineScheduler``, so a limit that did not fire costs nothing once its body
  /// has ended. A body that enters a ``CommitPoint`` (a writer about to rename its file into
  /// place) before the limit is no longer stopped: it finishes, and its result stands.
  static func withTimeout<T: Sendable>(
    _ limit: Duration?, source: String?, what: String = "the operation", _ body: @escaping @Sendable () async throws -> T
  ) async throws -> T {
    guard let limit else { return try await body() }
    let expiry = PipelineError(.timedOut, "\(what) took longer than its \(limit) time limit", source: source)
    let race = TimeLimitRace<T>(until: ContinuousClock.now.advanced(by: limit), expiry: expiry)
    // The work knows its limits: a stage's commit point asks them (CommitPoint).
    let work = CommitPoint.$limits.withValue(CommitPoint.limits + [race]) {
      Task {
        do { race.workEnded(.success(try await body())) } catch { race.workEnded(.failure(error)) }
      }
    }
    let deadline = DeadlineScheduler.shared.schedule(after: limit) { race.stop(expiry) }
    do {
      let value = try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { race.start($0, work: work, deadline: deadline) }
      } onCancel: {
        race.stop(CancellationError())
      }
      await work.value  // the body has returned; its task ends at once, and with it what it held
      return value
    } catch {
      if race.bodyEnded { await work.value }  // not when abandoned: that body may never end
      throw error
    }
  }
}

/// Decides how a time-limited body ends: by its own result, or by a deadline or cancellation
/// (`stop`), after which the body gets ``PipelineExecutor/abandonAfter`` to wind down.
private final class TimeLimitRace<T: Sendable>: CommitGate {
  private struct State {
    var continuation: CheckedContinuation<T, any Error>?
    var work: Task<Void, Never>?
    var deadline: DeadlineScheduler.Token?
    var stopped: (any Error)?  // the deadline or cancellation, once decided
    var ended: Result<T, any Error>?  // the body's result, if it came before `start`
    var resumed = false
    var bodyEnded = false
    /// The body passed a commit point in time: it is no longer stopped, and its result stands.
    var committed = false
  }
  private enum Next {
    case wait
    case resume(Result<T, any Error>)
    case stopNow
  }
  private let state = Protected(State())
  /// When the limit passes, and the error it ends with: work that ends later is over its limit
  /// even if the scheduler's thread has not fired yet (on a loaded machine it can be late).
  private let limitEnds: ContinuousClock.Instant
  private let expiry: any Error

  init(until limitEnds: ContinuousClock.Instant, expiry: any Error) {
    self.limitEnds = limitEnds
    self.expiry = expiry
  }

  func start(_ continuation: CheckedContinuation<T, any Error>, work: Task<Void, Never>, deadline: DeadlineScheduler.Token) {
    let next = state.withLock { state -> Next in
      state.work = work
      state.deadline = deadline
      if let ended = state.ended {
        state.resumed = true
        return .resume(state.stopped.map { .failure($0) } ?? ended)
      }
      state.continuation = continuation
      return state.stopped == nil ? .wait : .stopNow
    }
    switch next {
    case .wait: break
    case .resume(let result):
      DeadlineScheduler.shared.cancel(deadline)
      continuation.resume(with: result)
    case .stopNow:
      work.cancel()
      DeadlineScheduler.shared.cancel(deadline)
      abandonLater()
    }
  }

  /// The body is about to make its work visible: allowed while the limit has neither stopped it
  /// nor passed; the limit then lets it finish.
  func letCommit() -> Bool {
    state.withLock { state in
      guard state.stopped == nil, ContinuousClock.now < limitEnds else { return false }
      state.committed = true
      return true
    }
  }

  /// True once the body has returned or thrown.
  var bodyEnded: Bool { state.withLock { $0.bodyEnded } }

  /// The body returned or threw.
  func workEnded(_ result: Result<T, any Error>) {
    let (continuation, deadline, outcome) = state.withLock {
      state -> (CheckedContinuation<T, any Error>?, DeadlineScheduler.Token?, Result<T, any Error>) in
      state.bodyEnded = true
      if state.stopped == nil, !state.committed, ContinuousClock.now >= limitEnds { state.stopped = expiry }
      let outcome = state.stopped.map { .failure($0) } ?? result
      guard !state.resumed else { return (nil, nil, outcome) }
      guard let continuation = state.continuation else {
        state.ended = result
        return (nil, nil, outcome)
      }
      state.resumed = true
      state.continuation = nil
      return (continuation, state.deadline, outcome)
    }
    if let deadline { DeadlineScheduler.shared.cancel(deadline) }
    continuation?.resume(with: outcome)
  }

  /// The deadline passed or the caller was cancelled: the body is cancelled and given a moment.
  func stop(_ error: any Error) {
    let (work, deadline, started) = state.withLock {
      state -> (Task<Void, Never>?, DeadlineScheduler.Token?, Bool) in
      guard state.stopped == nil, !state.resumed, !state.committed else { return (nil, nil, false) }
      state.stopped = error
      return (state.work, state.deadline, state.continuation != nil)
    }
    work?.cancel()
    if let deadline { DeadlineScheduler.shared.cancel(deadline) }
    if started { abandonLater() }
  }

  private func abandonLater() {
    _ = DeadlineScheduler.shared.schedule(after: PipelineExecutor.abandonAfter) { [self] in
      let (continuation, error) = state.withLock { state -> (CheckedContinuation<T, any Error>?, (any Error)?) in
        guard !state.resumed, let continuation = state.continuation, let error = state.stopped else { return (nil, nil) }
        state.resumed = true
        state.continuation = nil
        return (continuation, error)
      }
      if let continuation, let error { continuation.resume(throwing: error) }
    }
  }
}
