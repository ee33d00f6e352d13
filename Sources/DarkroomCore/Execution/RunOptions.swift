/// How one run of a pipeline behaves: observers, `willFinish` hooks, time limits and thread pool.
///
/// ```swift
/// var options = RunOptions(timeout: .seconds(10))
/// options.observers.append(MyObserver())
/// options.onWillFinish { (image: EncodedImage, operation) in
///   try audit.record(image, for: operation.source)    // throwing here fails the operation
/// }
/// let operation = pipeline.run(source, options: options)
/// ```
public struct RunOptions: Sendable {
  /// Notified of every event, on the working task, in order.
  public var observers: [any OperationObserver]
  /// The longest the whole operation may take; `nil` for no limit. Default 60 s, as
  /// AsyncImageView's loading timeout. On expiry the operation fails with `timedOut`.
  public var timeout: Duration?
  /// The pool blocking stage work runs on.
  package var pool: BlockingPool = .shared
  /// The longest one stage may take, unless ``stageTimeouts`` names its kind; `nil` for no limit.
  /// On expiry the operation fails with `timedOut`, naming the stage.
  public var stageTimeout: Duration?
  /// Time limits for stages of some kinds (`["fetch": .seconds(10)]`), overriding
  /// ``stageTimeout``.
  public var stageTimeouts: [String: Duration] = [:]
  /// The variant this run produces (a writer's `{variant}`), set by ``PipelineVariants``.
  public var variant: String?
  /// Layers the run gets besides those its stages bring and its time limits (``RunLayer``): an
  /// ``ImageLoader`` adds the one that schedules and shares the run's stage work.
  package var layers: [any RunLayerFactory] = []
  /// Hooks run after the last stage and before the result is visible, on the working task.
  public private(set) var willFinishHooks: [WillFinishHook]

  /// A `willFinish` hook: receives the output and the operation. Throwing fails the operation with
  /// code `willFinishFailed` (the thrown `PipelineError` is kept as is).
  public typealias WillFinishHook = @Sendable (any Sendable, OperationInfo) async throws -> Void

  public init(observers: [any OperationObserver] = [], timeout: Duration? = .seconds(60), stageTimeout: Duration? = nil) {
    self.observers = observers
    self.timeout = timeout
    self.stageTimeout = stageTimeout
    self.willFinishHooks = []
  }

  /// The time limit for a stage of `kind`.
  public func timeLimit(forStageKind kind: String) -> Duration? { stageTimeouts[kind] ?? stageTimeout }

  /// The time limit for `stage`. A fused stage (`decode+resize`) without a limit of its own gets
  /// the sum of the limits its parts have (a part without one adds nothing: `decode=5` bounds a
  /// fused `decode+resize` by 5 s), and none when no part has one.
  public func timeLimit(for stage: AnyStage) -> Duration? {
    if let own = stageTimeouts[stage.kind] { return own }
    guard !stage.fusedKinds.isEmpty else { return stageTimeout }
    let parts = stage.fusedKinds.compactMap { timeLimit(forStageKind: $0) }
    return parts.isEmpty ? nil : parts.reduce(.zero, +)
  }

  /// Adds a hook for outputs of type `T` (other outputs skip it).
  public mutating func onWillFinish<T: Sendable>(_ hook: @escaping @Sendable (T, OperationInfo) async throws -> Void) {
    willFinishHooks.append { output, info in
      if let typed = output as? T { try await hook(typed, info) }
    }
  }
}
