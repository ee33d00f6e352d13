import Foundation

/// Runs stage graphs: the one executor behind every pipeline, built in code or loaded from JSON.
///
/// For each run it creates a ``PipelineOperation`` and a task that runs the graph's stages in
/// order, feeding the operation's ``OperationStateMachine`` and performing its actions. Errors are
/// normalised into ``PipelineError`` carrying the failing stage and the source.
///
/// ```swift
/// let operation = PipelineExecutor().start(graph, input: ImageSource("a.jpg"), as: (any Sendable).self)
/// ```
public struct PipelineExecutor: Sendable {
  /// Creates an executor. Blocking work runs on each run's ``RunOptions/pool``.
  public init() {}

  /// Starts running `graph` on `input`; the returned operation is already running. `register`
  /// sees the operation before it starts (to book-keep it before any event can arrive).
  public func start<Output: Sendable>(
    _ graph: StageGraph, input: any Sendable, options: RunOptions = RunOptions(), as: Output.Type = Output.self,
    register: (PipelineOperation<Output>) -> Void = { _ in }
  ) -> PipelineOperation<Output> {
    let source = input as? ImageSource
    let info = OperationInfo(id: OperationID(), pipelineName: graph.name, source: source?.description)
    var seen: Set<ObjectIdentifier> = []
    let stageObservers = graph.runnableStages.compactMap { ($0.base as? any OperationObservingStage)?.operationObserver }
      .filter { observer in  // one notifier behind several notify stages announces each end once
        guard type(of: observer) is AnyClass else { return true }
        return seen.insert(ObjectIdentifier(observer as AnyObject)).inserted
      }
    let operation = PipelineOperation<Output>(info: info, observers: options.observers + stageObservers)
    let pool = options.pool
    register(operation)
    let task = Task {
      await Self.execute(graph, input: input, source: source, operation: operation, options: options, pool: pool)
    }
    operation.attach(task)
    return operation
  }

  private static func execute<Output: Sendable>(
    _ graph: StageGraph, input: any Sendable, source: ImageSource?, operation: PipelineOperation<Output>,
    options: RunOptions, pool: BlockingPool
  ) async {
    operation.handle(.start)
    var stageContext = StageContext(
      operationID: operation.id, pipelineName: graph.name, source: source, pool: pool,
      emitNote: { [weak operation] note in operation?.handle(.note(note)) },
      emitProgress: { [weak operation] received, expected in operation?.handle(.progress(received: received, expected: expected))
      },
      emitCache: { [weak operation] event in operation?.handle(.cache(event)) })
    stageContext.variant = options.variant
    let context = stageContext
    let sourceText = source?.description
    do {
      // The time limit covers the stages and the willFinish hooks.
      let output: Output = try await withTimeout(options.timeout, source: sourceText) {
        let stages = graph.runnableStages
        let checkpoints = try await Checkpoints.prepare(stages: stages, input: input, source: source, context: context)
        let start = try await checkpoints.start(input: input, source: source, context: context) { body in
          try await runStage(stages[0], index: 0, context: context, operation: operation) { _, _ in try await body() }
        }
        var run = RunState(value: start.value, start: start.index, facts: start.facts)
        try await runStages(
          stages, state: &run, checkpoints: checkpoints, context: context, options: options, operation: operation)
        let value = run.value
        guard let output = value as? Output else {
          throw PipelineError(
            .typeMismatch,
            "pipeline \"\(graph.name)\" produced \(valueDescription(of: type(of: value))), not \(valueDescription(of: Output.self))"
          )
        }
        if operation.handle(.outputReady) {
          await checkpoints.store(run.pending, facts: run.facts, context: context)
          try await runWillFinishHooks(options.willFinishHooks, output: output, info: operation.info, source: sourceText)
        }
        return output
      }
      try Task.checkCancellation()
      let summary = (output as? any SummarizableOutput)?.outputSummary ?? OutputSummary()
      operation.handle(.willFinishSucceeded(summary), output: output)
    } catch {
      if let failure = error as? PipelineError, failure.code != .cancelled {
        operation.handle(.fail(failure.attributed(stageKind: nil, stageIdentifier: nil, source: sourceText)))
      } else if error is CancellationError || (error as? PipelineError)?.code == .cancelled || Task.isCancelled {
        operation.handle(.cancel)
      } else {
        operation.handle(.fail(PipelineError(.stageFailed, "\(error)", source: sourceText, cause: error)))
      }
    }
  }

  private static func runWillFinishHooks(
    _ hooks: [RunOptions.WillFinishHook], output: any Sendable, info: OperationInfo, source: String?
  ) async throws {
    for hook in hooks {
      do {
        try await hook(output, info)
      } catch let error as PipelineError {
        throw error
      } catch let error as CancellationError {
        throw error
      } catch {
        throw PipelineError(.willFinishFailed, "a willFinish hook refused the result: \(error)", source: source, cause: error)
      }
    }
  }

  /// What a run carries from stage to stage: the value, where it started, the values to store at
  /// checkpoints that missed, and what the fetched response said about its freshness.
  struct RunState {
    var value: any Sendable
    var start: Int
    var facts: ResponseFacts?
    var pending: [(index: Int, value: any Sendable)] = []
  }

  private static func runStages<Output: Sendable>(
    _ stages: [AnyStage], state: inout RunState, checkpoints: Checkpoints, context: StageContext, options: RunOptions,
    operation: PipelineOperation<Output>
  ) async throws {
    let sharing = SharedWork(
      options.scheduling, source: context.source, stages: stages, pipeline: context.pipelineName, variant: context.variant,
      cohort: options.cohort)
    defer { sharing?.finish() }
    var index = state.start
    while index < stages.count {
      try Task.checkCancellation()
      if let sharing, let joined = try await joinShared(sharing, stages: stages, from: index, operation: operation) {
        // The run that computed the joined stages stores their checkpoints.
        state.value = joined.result.value
        state.facts = joined.result.facts ?? state.facts
        index = joined.through + 1
        continue
      }
      let stage = stages[index]
      let position = index
      let input = state.value
      let facts = state.facts
      let limit = options.timeLimit(for: stage)
      let value = try await runStage(
        stage, index: index, limit: limit, announcesStart: sharing != nil, context: context, operation: operation
      ) { context, announce in
        guard let sharing else { return try await stage.process(input, context: context) }
        return try await sharing.run(stage, index: position, input: input, facts: facts, context: context, announce: announce)
          .value
      }
      if let fetched = value as? FetchedData, fetched.status != nil { state.facts = ResponseFacts(fetched, now: Date()) }
      if checkpoints.keys[index] != nil { state.pending.append((index, value)) }
      state.value = value
      index += 1
    }
  }

  /// Joins the deepest shared work already running from `index` on, announcing the stages it
  /// covers as this run's own (with a note saying they were shared).
  private static func joinShared<Output: Sendable>(
    _ sharing: SharedWork, stages: [AnyStage], from index: Int, operation: PipelineOperation<Output>
  ) async throws -> (through: Int, result: SharedWork.Result)? {
    let clock = ContinuousClock()
    let started = clock.now
    guard let joined = try await sharing.joinDeepest(from: index) else { return nil }
    let waited = clock.now - started
    operation.handle(.note("joined shared in-flight work for stages[\(index)...\(joined.through)]"))
    for shared in index...joined.through {
      let info = StageInfo(index: shared, stage: stages[shared], joined: true)
      operation.handle(.stageStarted(info))
      operation.handle(.stageFinished(info, shared == joined.through ? waited : .zero))
    }
    return joined
  }

  /// Runs one stage's work with its lifecycle events and error attribution. With
  /// `announcesStart`, the body says when the stage starts and whether it joined shared work;
  /// otherwise it starts at once.
  private static func runStage<Output: Sendable>(
    _ stage: AnyStage, index: Int, limit: Duration? = nil, announcesStart: Bool = false, context: StageContext,
    operation: PipelineOperation<Output>,
    _ body:
      @escaping @Sendable (StageContext, _ announce: @escaping @Sendable (_ joined: Bool) -> Void) async throws -> any Sendable
  ) async throws -> any Sendable {
    let announced = Protected<Bool?>(nil)
    let announce: @Sendable (Bool) -> Void = { [weak operation] joined in
      let first = announced.withLock { state -> Bool in
        guard state == nil else { return false }
        state = joined
        return true
      }
      if first { operation?.handle(.stageStarted(StageInfo(index: index, stage: stage, joined: joined))) }
    }
    if !announcesStart { announce(false) }
    let clock = ContinuousClock()
    let started = clock.now
    let value: any Sendable
    do {
      value = try await withTimeout(limit, source: context.source?.description, what: "stage \"\(stage.kind)\"") {
        try await body(context, announce)
      }
    } catch let error as PipelineError {
      announce(false)
      throw error.attributed(stageKind: stage.kind, stageIdentifier: stage.identifier, source: context.source?.description)
    } catch let error as CancellationError {
      throw error
    } catch {
      announce(false)
      throw PipelineError(
        .stageFailed, "stage \"\(stage.kind)\" failed: \(error)", stageKind: stage.kind, stageIdentifier: stage.identifier,
        source: context.source?.description, cause: error)
    }
    announce(false)
    let joined = announced.withLock { $0 } ?? false
    operation.handle(.stageFinished(StageInfo(index: index, stage: stage, joined: joined), clock.now - started))
    return value
  }
}
