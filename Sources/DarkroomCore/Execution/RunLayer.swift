import Foundation

/// Cross-cutting work around one run's stages: the one place where caching, loading (scheduling,
/// coalescing), notification and time limits plug into the executor.
///
/// A layer is made for each run by its ``RunLayerFactory`` and sees the run through four hooks,
/// all no-ops by default:
/// - ``aroundRun(_:body:)`` wraps the whole run (the stages and the `willFinish` work);
/// - ``resume(from:value:run:runStage:)`` may skip ahead before a stage runs: to a checkpoint that
///   holds a value, or to the end of shared work already running;
/// - ``around(_:next:)`` wraps one stage call, the middleware shape (`next` is the rest of the
///   chain, ending in the stage itself);
/// - ``willFinish(_:run:)`` acts once the output is ready and before it is visible (storing
///   checkpoints); ``stagesEnded()`` says that the run makes no more stage calls.
///
/// The executor keeps the loop, the events and the errors. It knows layers only through this
/// protocol; the layers live beside the concern they serve (`Caching/CheckpointLayer.swift`,
/// `Loading/LoadingLayer.swift`, `Notifications/NotifyStage.swift`, `Execution/TimeLimitLayer.swift`).
///
/// ```swift
/// struct CountingLayer: RunLayer {
///   let calls: Protected<Int>
///   func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
///     calls.withLock { $0 += 1 }
///     return try await next(call)
///   }
/// }
/// ```
package protocol RunLayer: Sendable {
  /// Runs `body`, the whole run.
  func aroundRun(_ run: RunPlan, body: @escaping @Sendable () async throws -> RunValue) async throws -> RunValue
  /// Before stage `index` runs on `value`: where to continue instead, or `nil`. `runStage` runs a
  /// stage through the whole chain, with its events (a layer resuming from a stale checkpoint
  /// revalidates through it, so the fetch keeps its scheduling, sharing and time limit).
  func resume(from index: Int, value: RunValue, run: RunPlan, runStage: RunPlan.StageRunner) async throws -> Resumption?
  /// Runs one stage call; `next` is the rest of the chain.
  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue
  /// The run makes no more stage calls (it finished its stages or failed).
  func stagesEnded()
  /// The output is ready and not yet visible. Throwing fails the run.
  func willFinish(_ output: RunValue, run: RunPlan) async throws
}

extension RunLayer {
  package func aroundRun(_ run: RunPlan, body: @escaping @Sendable () async throws -> RunValue) async throws -> RunValue {
    try await body()
  }
  package func resume(from index: Int, value: RunValue, run: RunPlan, runStage: RunPlan.StageRunner) async throws
    -> Resumption?
  { nil }
  package func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue { try await next(call) }
  package func stagesEnded() {}
  package func willFinish(_ output: RunValue, run: RunPlan) async throws {}
}

/// Makes a run's layer, and says where it sits in the chain.
///
/// Factories come from a run's ``RunOptions/layers`` (an ``ImageLoader`` adds its scheduling) and
/// from its stages (a ``LayeredStage``: a `cache` stage brings checkpoints, a `notify` stage its
/// notifier). Factories with equal ``key`` make one layer per run.
package protocol RunLayerFactory: Sendable {
  /// Factories with equal keys are one: several `cache` stages share one checkpoint layer.
  var key: AnyHashable { get }
  /// Where the layer sits: lower is further out.
  var order: RunLayerOrder { get }
  /// Observers every run with this layer gets (a notifier announcing how runs end).
  var observers: [any OperationObserver] { get }
  /// The layer for one run, or `nil` when this run needs none.
  func makeLayer(for run: RunPlan) -> (any RunLayer)?
}

extension RunLayerFactory {
  package var observers: [any OperationObserver] { [] }
}

/// Where a layer sits in a run's chain, from the outside in.
package enum RunLayerOrder: Int, Comparable, Sendable {
  /// Results kept across runs: checkpoints.
  case results = 100
  /// Watching runs: notifiers.
  case observation = 200
  /// Time limits: a stage's limit covers its wait for a slot.
  case limits = 300
  /// Where and with whom the work runs: resource classes, pools, shared in-flight work.
  case work = 400
  /// What a stage's output says about itself (a fetched response's freshness), noted inside the
  /// shared work so that runs joining it get it with the value.
  case values = 500

  package static func < (lhs: RunLayerOrder, rhs: RunLayerOrder) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A stage that brings a layer to every run of a pipeline holding it.
///
/// ```swift
/// extension Cache: LayeredStage {
///   package var runLayer: (any RunLayerFactory)? { CheckpointLayer.Factory() }
/// }
/// ```
package protocol LayeredStage {
  /// The layer, or `nil` when this stage needs none.
  var runLayer: (any RunLayerFactory)? { get }
}

extension Array where Element == AnyStage {
  /// The layer factories these stages bring (``LayeredStage``), one per key, in stage order.
  var broughtLayers: [any RunLayerFactory] {
    var seen: Set<AnyHashable> = []
    return compactMap { stage in
      guard let factory = (stage.base as? any LayeredStage)?.runLayer, seen.insert(factory.key).inserted else {
        return nil
      }
      return factory
    }
  }
}

/// What a run carries from stage to stage: the value, and what layers learned along the way (what
/// the fetched response said about freshness, say), which later stages' calls inherit.
package struct RunValue: Sendable {
  package var value: any Sendable
  package var annotations: RunAnnotations

  package init(_ value: any Sendable, annotations: RunAnnotations = RunAnnotations()) {
    self.value = value
    self.annotations = annotations
  }
}

/// Facts attached to a run's value by layers, one per type.
///
/// ```swift
/// output.annotations[ResponseFacts.self] = ResponseFacts(fetched, now: Date())
/// ```
package struct RunAnnotations: Sendable {
  private var facts: [ObjectIdentifier: any Sendable] = [:]

  package init() {}

  package subscript<Fact: Sendable>(_ type: Fact.Type) -> Fact? {
    get { facts[ObjectIdentifier(type)] as? Fact }
    set { facts[ObjectIdentifier(type)] = newValue }
  }
}

/// One call of one stage on its way through a run's layers.
package struct StageCall: Sendable {
  /// The rest of the chain.
  package typealias Next = @Sendable (StageCall) async throws -> RunValue

  /// The stage to run (a layer may run a stand-in: a revalidating fetch).
  package var stage: AnyStage
  /// Its place in the run's stages.
  package var index: Int
  package var input: RunValue
  package var context: StageContext
  /// Says that the stage started, and whether it joined work already running; the first call
  /// counts. The stage itself says it started (not joined) if no layer said so before.
  package let announce: @Sendable (_ joined: Bool) -> Void
}

/// Where a run goes on after a layer skipped ahead.
package struct Resumption: Sendable {
  /// How the skipped stages are reported.
  package enum Kind: Sendable {
    /// Without events (a checkpoint held the value: its `cache` event says so).
    case silently
    /// As stages of this run that joined shared work (the last one taking the time waited).
    case joined
  }

  package var value: RunValue
  /// The first stage still to run.
  package var next: Int
  package var kind: Kind

  package init(value: RunValue, next: Int, kind: Kind) {
    self.value = value
    self.next = next
    self.kind = kind
  }
}

/// What a run's layers know about it.
package struct RunPlan: Sendable {
  /// Runs a stage (or a stand-in for it) at an index, through the whole chain and with its events.
  package typealias StageRunner = @Sendable (_ stage: AnyStage, _ index: Int, _ input: RunValue) async throws -> RunValue

  /// The stages as they run.
  package let stages: [AnyStage]
  /// The run's input.
  package let input: any Sendable
  /// The context stage calls start from: the run's source, pipeline, variant and pool.
  package let context: StageContext
  /// The run's options.
  package let options: RunOptions
}
