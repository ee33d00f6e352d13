import Foundation

/// One run of a pipeline: its id, status, events and result, and a way to cancel it.
///
/// Like Nimbus' `NIOperation` or Nuke's `ImageTask`. An operation starts as soon as it is created
/// by ``Pipeline/run(_:options:)``; ``value`` waits for its result. ``events`` can be read by any
/// number of consumers, at any time: each new stream first replays what already happened, so no
/// event is missed by subscribing late.
///
/// ```swift
/// let operation = pipeline.run(ImageSource("a.jpg"))
/// Task { for await event in operation.events { print(event) } }
/// let image = try await operation.value
/// ```
public final class PipelineOperation<Output: Sendable>: Sendable {
  /// The operation's id.
  public let id: OperationID
  /// The pipeline name and source.
  public let info: OperationInfo

  private struct State {
    var machine = OperationStateMachine()
    var history: [OperationEvent] = []
    var subscribers: [Int: AsyncStream<OperationEvent>.Continuation] = [:]
    var nextSubscriber = 0
    var outcome: Result<Output, PipelineError>?
    var waiters: [LocalToken: CheckedContinuation<Result<Output, PipelineError>, Never>] = [:]
    var task: Task<Void, Never>?
    var cancelRequested = false
  }
  // Waitable: an NSLock-backed box (ThreadSanitizer sees through it, unlike Synchronization.Mutex)
  // that also wakes ``whenWaited(by:)`` once enough tasks wait for ``value``.
  private let state = Waitable(State())
  private let observers: [any OperationObserver]

  init(info: OperationInfo, observers: [any OperationObserver]) {
    self.id = info.id
    self.info = info
    self.observers = observers
  }

  /// The current status.
  public var status: OperationStatus { state.withLock { $0.machine.status } }

  /// Every event so far.
  public var history: [OperationEvent] { state.withLock { $0.history } }

  /// A new stream of this operation's events: what already happened, then what happens next; it
  /// ends after the terminal event.
  public var events: AsyncStream<OperationEvent> {
    let (stream, continuation) = AsyncStream<OperationEvent>.makeStream(bufferingPolicy: .unbounded)
    let (replay, finished) = state.withLock { state -> ([OperationEvent], Bool) in
      if state.machine.status.isTerminal { return (state.history, true) }
      state.nextSubscriber += 1
      let key = state.nextSubscriber
      state.subscribers[key] = continuation
      continuation.onTermination = { [weak self] _ in
        _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
      }
      // Yielding under the lock keeps the replay ahead of any event published next.
      for event in state.history { continuation.yield(event) }
      return ([], false)
    }
    for event in replay { continuation.yield(event) }
    if finished { continuation.finish() }
    return stream
  }

  /// The result: waits until the operation ends. Throws the operation's ``PipelineError``
  /// (code `cancelled` when it was cancelled).
  ///
  /// Cancelling the task that waits stops its wait (it throws `cancelled`) and cancels the
  /// operation when no other task waits for it: a server whose client hung up stops the work. An
  /// operation other tasks still wait for goes on for them.
  public var value: Output {
    get async throws(PipelineError) {
      let waiter = LocalToken()
      let result = await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<Output, PipelineError>, Never>) in
          let (outcome, abandoned) = state.withLock { state -> (Result<Output, PipelineError>?, Bool) in
            if let outcome = state.outcome { return (outcome, false) }
            // Cancelled before it began to wait: the cancellation handler found nothing to remove.
            if Task.isCancelled { return (.failure(Self.waitCancelled(info)), state.waiters.isEmpty) }
            state.waiters[waiter] = continuation
            return (nil, false)
          }
          if let outcome { continuation.resume(returning: outcome) }
          if abandoned { cancel() }
        }
      } onCancel: {
        stopWaiting(waiter)
      }
      return try result.get()
    }
  }

  /// Returns once at least `count` tasks wait for ``value`` at the same time, or the operation has
  /// ended: for tests of what cancelling one of several waiters does.
  package func whenWaited(by count: Int) async {
    await state.wait { $0.waiters.count >= count || $0.outcome != nil }
  }

  /// A waiter's task was cancelled: it stops waiting; the last waiter to go cancels the operation.
  private func stopWaiting(_ waiter: LocalToken) {
    let (continuation, last) = state.withLock { state -> (CheckedContinuation<Result<Output, PipelineError>, Never>?, Bool) in
      guard let continuation = state.waiters.removeValue(forKey: waiter) else { return (nil, false) }
      return (continuation, state.waiters.isEmpty && state.outcome == nil)
    }
    continuation?.resume(returning: .failure(Self.waitCancelled(info)))
    if last { cancel() }
  }

  private static func waitCancelled(_ info: OperationInfo) -> PipelineError {
    PipelineError(.cancelled, "the task waiting for the operation was cancelled", source: info.source)
  }

  /// The result as a `Result`, without throwing.
  public var result: Result<Output, PipelineError> {
    get async {
      do { return .success(try await value) } catch { return .failure(error) }
    }
  }

  /// Asks the operation to stop. A running stage is interrupted at its next suspension point
  /// (blocking work is abandoned); the operation then ends with the `cancelled` event. Cancelling
  /// a finished operation does nothing.
  public func cancel() {
    let task = state.withLock { state -> Task<Void, Never>? in
      state.cancelRequested = true
      return state.task
    }
    task?.cancel()
  }

  func attach(_ task: Task<Void, Never>) {
    let cancel = state.withLock { state -> Bool in
      state.task = task
      return state.cancelRequested
    }
    if cancel { task.cancel() }
  }

  /// Feeds the state machine and performs its actions. Returns true when `runWillFinish` was asked.
  // The runner's operations are `PipelineOperation<any Sendable>`: made for that type too, this
  // runs without looking up generic metadata on every event.
  @_specialize(where Output == any Sendable)
  @discardableResult
  func handle(_ input: OperationStateMachine.Input, output: Output? = nil) -> Bool {
    var runWillFinish = false
    var toNotify: [OperationEvent] = []
    var resume: [CheckedContinuation<Result<Output, PipelineError>, Never>] = []
    var outcome: Result<Output, PipelineError>?
    var ended: [AsyncStream<OperationEvent>.Continuation] = []
    state.withLock { state in
      for action in state.machine.handle(input) {
        switch action {
        case .emit(let event):
          state.history.append(event)
          for continuation in state.subscribers.values { continuation.yield(event) }
          toNotify.append(event)
        case .runWillFinish:
          runWillFinish = true
        case .deliverResult:
          if let output { outcome = .success(output) }
        case .deliverFailure(let error):
          outcome = .failure(error)
        case .deliverCancellation:
          outcome = .failure(PipelineError(.cancelled, "the operation was cancelled", source: info.source))
        }
      }
    }
    for event in toNotify {
      for observer in observers { observer.receive(event, for: info) }
    }
    // The outcome is published only after the observers have seen the last event, so that whoever
    // awaits ``value`` finds them done (a loader has forgotten the load, a sink has the event).
    if let outcome {
      state.withLock { state in
        state.outcome = outcome
        resume = Array(state.waiters.values)
        state.waiters = [:]
        ended = Array(state.subscribers.values)
        state.subscribers = [:]
        state.task = nil
      }
    }
    for continuation in ended { continuation.finish() }
    if let outcome {
      for waiter in resume { waiter.resume(returning: outcome) }
    }
    return runWillFinish
  }
}
