/// Follows operations: every method has a no-op default, implement the ones you need.
///
/// Methods are called in event order, on the operation's working task — except `progress` and
/// `note`, which come from the thread doing the work (the curl loop, a blocking-pool thread). `operationWillFinish`
/// is called after the last stage and before the result is visible to anyone: the last chance to
/// audit or store it. Observers must not block; hand slow work elsewhere.
///
/// ```swift
/// struct Printer: OperationObserver {
///   func operationDidFinish(_ operation: OperationInfo, output: OutputSummary) {
///     print(operation.source ?? "?", output.width ?? 0, "x", output.height ?? 0)
///   }
/// }
/// let operation = pipeline.run(source, options: RunOptions(observers: [Printer()]))
/// ```
public protocol OperationObserver: Sendable {
  func operationDidStart(_ operation: OperationInfo)
  func operation(_ operation: OperationInfo, didStartStage stage: StageInfo)
  func operation(_ operation: OperationInfo, didFinishStage stage: StageInfo, duration: Duration)
  func operation(_ operation: OperationInfo, didNote note: String)
  func operation(_ operation: OperationInfo, didReceive bytes: Int, of expected: Int?)
  func operation(_ operation: OperationInfo, didCache event: CacheEvent)
  func operationWillFinish(_ operation: OperationInfo)
  func operationDidFinish(_ operation: OperationInfo, output: OutputSummary)
  func operation(_ operation: OperationInfo, didFailWith error: PipelineError)
  func operationDidCancel(_ operation: OperationInfo)
  /// Receives every event; the default dispatches to the methods above.
  func receive(_ event: OperationEvent, for operation: OperationInfo)
}

extension OperationObserver {
  public func operationDidStart(_ operation: OperationInfo) {}
  public func operation(_ operation: OperationInfo, didStartStage stage: StageInfo) {}
  public func operation(_ operation: OperationInfo, didFinishStage stage: StageInfo, duration: Duration) {}
  public func operation(_ operation: OperationInfo, didNote note: String) {}
  public func operation(_ operation: OperationInfo, didReceive bytes: Int, of expected: Int?) {}
  public func operation(_ operation: OperationInfo, didCache event: CacheEvent) {}
  public func operationWillFinish(_ operation: OperationInfo) {}
  public func operationDidFinish(_ operation: OperationInfo, output: OutputSummary) {}
  public func operation(_ operation: OperationInfo, didFailWith error: PipelineError) {}
  public func operationDidCancel(_ operation: OperationInfo) {}

  /// Dispatches an event to the matching method.
  public func receive(_ event: OperationEvent, for operation: OperationInfo) {
    switch event {
    case .started: operationDidStart(operation)
    case .stageStarted(let stage): self.operation(operation, didStartStage: stage)
    case .stageFinished(let stage, let duration): self.operation(operation, didFinishStage: stage, duration: duration)
    case .note(let text): self.operation(operation, didNote: text)
    case .progress(let received, let expected): self.operation(operation, didReceive: received, of: expected)
    case .cache(let event): self.operation(operation, didCache: event)
    case .willFinish: operationWillFinish(operation)
    case .finished(let summary): operationDidFinish(operation, output: summary)
    case .failed(let error): self.operation(operation, didFailWith: error)
    case .cancelled: operationDidCancel(operation)
    }
  }
}

/// An observer made of closures, for quick use and tests.
///
/// ```swift
/// let printer = ClosureObserver { operation, event in print(operation.id, event) }
/// let operation = pipeline.run(source, options: RunOptions(observers: [printer]))
/// ```
public struct ClosureObserver: OperationObserver {
  let onEvent: @Sendable (OperationInfo, OperationEvent) -> Void
  public init(_ onEvent: @escaping @Sendable (OperationInfo, OperationEvent) -> Void) { self.onEvent = onEvent }
  public func receive(_ event: OperationEvent, for operation: OperationInfo) { onEvent(operation, event) }
}
