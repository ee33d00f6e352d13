import Foundation

/// Runs stage graphs: the one executor behind every pipeline, built in code or loaded from JSON.
///
/// For each run it creates a ``PipelineOperation`` and a task that runs the graph's stages in
/// order, feeding the operation's ``OperationStateMachine`` and performing its actions. Errors are
/// normalised into ``PipelineError`` carrying the failing stage and the source. Everything else a
/// run does around its stages (checkpoints, scheduling and shared work, notifiers, time limits)
/// comes from the run's layers (``RunLayer``), in one chain: see Docs/Architecture.md.
///
/// ```swift
/// let operation = PipelineExecutor().start(graph, input: ImageSource("a.jpg"), as: (any Sendable).self)
/// ```
package struct PipelineExecutor: Sendable {
  /// Creates an executor. Blocking work runs on each run's ``RunOptions/pool``, unless a layer
  /// picks another pool for a stage (an ``ImageLoader`` does).
  public init() {}

  /// Starts running `graph` on `input`; the returned operation is already running. `register`
  /// sees the operation before it starts (to book-keep it before any event can arrive).
  public func start<Output: Sendable>(
    _ graph: StageGraph, input: any Sendable, options: RunOptions = RunOptions(), as: Output.Type = Output.self,
    register: (PipelineOperation<Output>) -> Void = { _ in }
  ) -> PipelineOperation<Output> {
    let source = input as? ImageSource
    let info = OperationInfo(id: OperationID(), pipelineName: graph.name, source: source?.description)
    let factories = Self.layerFactories(graph, options: options)
    let operation = PipelineOperation<Output>(info: info, observers: options.observers + factories.flatMap(\.observers))
    register(operation)
    let task = Task {
      await Self.execute(graph, input: input, source: source, operation: operation, options: options, factories: factories)
    }
    operation.attach(task)
    return operation
  }

  /// The run's layer factories, from the outside in: the options' own, the time limits, and those
  /// the stages bring; one per key.
  private static func layerFactories(_ graph: StageGraph, options: RunOptions) -> [any RunLayerFactory] {
    // A handful of factories: compared in place and sorted by insertion, not through a set and
    // a sort of pairs (9 µs a run before).
    var keys: [AnyHashable] = []
    var unique: [any RunLayerFactory] = []
    keys.reserveCapacity(4)
    unique.reserveCapacity(4)
    for factory in options.layers + [TimeLimitLayer.Factory()] + graph.broughtLayers {
      let key = factory.key
      guard !keys.contains(key) else { continue }
      keys.append(key)
      // Stable: a factory goes after those of its own place and before those further in.
      let order = factory.order
      let position = unique.lastIndex { $0.order <= order }.map { $0 + 1 } ?? 0
      unique.insert(factory, at: position)
    }
    return unique
  }

  @_specialize(where Output == any Sendable)  // the runner's operations (see PipelineOperation.handle)
  private static func execute<Output: Sendable>(
    _ graph: StageGraph, input: any Sendable, source: ImageSource?, operation: PipelineOperation<Output>,
    options: RunOptions, factories: [any RunLayerFactory]
  ) async {
    operation.handle(.start)
    var stageContext = StageContext(
      operationID: operation.id, pipelineName: graph.name, source: source, pool: options.pool,
      emitNote: { [weak operation] note in operation?.handle(.note(note)) },
      emitProgress: { [weak operation] received, expected in operation?.handle(.progress(received: received, expected: expected))
      },
      emitCache: { [weak operation] event in operation?.handle(.cache(event)) })
    stageContext.variant = options.variant
    let plan = RunPlan(stages: graph.runnableStages, input: input, context: stageContext, options: options)
    let run = Run(plan: plan, layers: factories.compactMap { $0.makeLayer(for: plan) }, operation: operation)
    let sourceText = source?.description
    do {
      let final = try await run.aroundRun {
        let value = try await run.runStages()
        guard value.value is Output else {
          throw PipelineError(
            .typeMismatch,
            "pipeline \"\(graph.name)\" produced \(valueDescription(of: type(of: value.value))), not \(valueDescription(of: Output.self))"
          )
        }
        if operation.handle(.outputReady) {
          // The layers act first (checkpoints are stored), then the options' hooks.
          let layerHooks: [RunOptions.WillFinishHook] = run.layers.map { layer in
            { _, _ in try await layer.willFinish(value, run: plan) }
          }
          try await runWillFinishHooks(
            layerHooks + options.willFinishHooks, output: value.value, info: operation.info, source: sourceText)
        }
        return value
      }
      try Task.checkCancellation()
      guard let output = final.value as? Output else { throw CancellationError() }  // checked above
      operation.handle(.willFinishSucceeded(outputSummary(of: output) ?? OutputSummary()), output: output)
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

  /// One run: its stages, its layers, and the operation its events go to.
  private struct Run<Output: Sendable>: Sendable {
    let plan: RunPlan
    /// From the outside in.
    let layers: [any RunLayer]
    let operation: PipelineOperation<Output>

    func aroundRun(_ body: @escaping @Sendable () async throws -> RunValue) async throws -> RunValue {
      let wrapped = layers.reversed().reduce(body) { inner, layer in { try await layer.aroundRun(plan, body: inner) } }
      return try await wrapped()
    }

    /// Runs the stages in order, letting layers skip ahead before each.
    func runStages() async throws -> RunValue {
      let stages = plan.stages
      var value = RunValue(plan.input)
      var index = 0
      defer { for layer in layers { layer.stagesEnded() } }
      while index < stages.count {
        try Task.checkCancellation()
        if let resumption = try await resume(from: index, value: value) {
          value = resumption.value
          index = resumption.next
          continue
        }
        value = try await runStage(stages[index], index: index, input: value)
        index += 1
      }
      return value
    }

    /// The first layer's resumption from `index`, reported as its kind says.
    private func resume(from index: Int, value: RunValue) async throws -> Resumption? {
      let runStage: RunPlan.StageRunner = { stage, index, input in try await self.runStage(stage, index: index, input: input) }
      for layer in layers {
        let clock = ContinuousClock()
        let started = clock.now
        guard let resumption = try await layer.resume(from: index, value: value, run: plan, runStage: runStage) else {
          continue
        }
        // Only forward: a layer cannot send the run back or past its end.
        guard resumption.next > index, resumption.next <= plan.stages.count else { continue }
        if case .joined = resumption.kind {
          let waited = clock.now - started
          let through = resumption.next - 1
          operation.handle(.note("joined shared in-flight work for stages[\(index)...\(through)]"))
          for shared in index...through {
            let info = StageInfo(index: shared, stage: plan.stages[shared], joined: true)
            operation.handle(.stageStarted(info))
            operation.handle(.stageFinished(info, shared == through ? waited : .zero))
          }
        }
        return resumption
      }
      return nil
    }

    /// Runs one stage call through the layers, with its lifecycle events and error attribution.
    func runStage(_ stage: AnyStage, index: Int, input: RunValue) async throws -> RunValue {
      let operation = operation
      let announced = Protected<Bool?>(nil)
      let announce: @Sendable (Bool) -> Void = { [weak operation] joined in
        let first = announced.withLock { state -> Bool in
          guard state == nil else { return false }
          state = joined
          return true
        }
        if first { operation?.handle(.stageStarted(StageInfo(index: index, stage: stage, joined: joined))) }
      }
      let context = plan.context
      let clock = ContinuousClock()
      let started = clock.now
      let value: RunValue
      do {
        let call = StageCall(stage: stage, index: index, input: input, context: context, announce: announce)
        value = try await chain(call)
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

    /// The layers' `around`, from the outside in, ending in the stage itself.
    private func chain(_ call: StageCall) async throws -> RunValue {
      let stage: StageCall.Next = { call in
        call.announce(false)
        let output = try await call.stage.process(call.input.value, context: call.context)
        return RunValue(output, annotations: call.input.annotations)
      }
      let next = layers.reversed().reduce(stage) { inner, layer in { call in try await layer.around(call, next: inner) } }
      return try await next(call)
    }
  }
}
