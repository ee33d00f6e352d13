/// The lifecycle of an operation as a pure state machine: inputs in, actions out, no I/O.
///
/// The executor feeds it what happened (`start`, a stage started, the output is ready, a
/// failure, a cancellation) and performs the actions it returns (emit an event, run the
/// `willFinish` hooks, deliver the result). Because every transition is here, the guarantees —
/// events in order, `willFinish` before the result is visible, exactly one terminal event — are
/// tested exhaustively without running anything.
///
/// ```swift
/// var machine = OperationStateMachine()
/// machine.handle(.start)          // [.emit(.started)]
/// machine.handle(.outputReady)    // [.emit(.willFinish), .runWillFinish]
/// machine.handle(.willFinishSucceeded(summary))  // [.emit(.finished(summary)), .deliverResult]
/// ```
package struct OperationStateMachine: Sendable {
  /// What happened.
  public enum Input: Sendable {
    case start
    case stageStarted(StageInfo)
    case stageFinished(StageInfo, Duration)
    case note(String)
    case progress(received: Int, expected: Int?)
    case cache(CacheEvent)
    case outputReady
    case willFinishSucceeded(OutputSummary)
    case fail(PipelineError)
    case cancel
  }

  /// What the executor must do, in order.
  public enum Action: Sendable {
    /// Publish this event to the stream and observers.
    case emit(OperationEvent)
    /// Call the `willFinish` observers and hooks on the working task now.
    case runWillFinish
    /// Make the result visible to whoever awaits it.
    case deliverResult
    /// Make the failure visible.
    case deliverFailure(PipelineError)
    /// Make the cancellation visible.
    case deliverCancellation
  }

  public private(set) var status: OperationStatus = .pending

  public init() {}

  /// Applies an input and returns the actions to perform. Inputs that make no sense in the current
  /// state (anything after a terminal state, a stage event before `start`) return no actions and
  /// change nothing.
  @discardableResult
  public mutating func handle(_ input: Input) -> [Action] {
    switch (status, input) {
    case (.pending, .start):
      status = .running
      return [.emit(.started)]
    case (.pending, .cancel), (.running, .cancel), (.finishing, .cancel):
      status = .cancelled
      return [.emit(.cancelled), .deliverCancellation]
    case (.pending, .fail(let error)), (.running, .fail(let error)), (.finishing, .fail(let error)):
      status = .failed
      return [.emit(.failed(error)), .deliverFailure(error)]
    case (.running, .stageStarted(let stage)):
      return [.emit(.stageStarted(stage))]
    case (.running, .stageFinished(let stage, let duration)):
      return [.emit(.stageFinished(stage, duration: duration))]
    case (.running, .note(let text)), (.finishing, .note(let text)):
      return [.emit(.note(text))]
    case (.running, .cache(let event)), (.finishing, .cache(let event)):
      return [.emit(.cache(event))]
    case (.running, .progress(let received, let expected)):
      return [.emit(.progress(received: received, expected: expected))]
    case (.running, .outputReady):
      status = .finishing
      return [.emit(.willFinish), .runWillFinish]
    case (.finishing, .willFinishSucceeded(let summary)):
      status = .finished
      return [.emit(.finished(summary)), .deliverResult]
    default:
      return []
    }
  }
}
