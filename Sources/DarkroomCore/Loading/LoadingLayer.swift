import Foundation

/// An ``ImageLoader``'s part in each run, as its layer: each stage call waits for a slot of its
/// resource class (at the run's priority) and runs on the matching pool; with coalescing, identical
/// in-flight work is shared at every stage boundary (joining the deepest prefix already being
/// computed before a stage, or the stage's own work when it is already running).
///
/// A prefix's key is the source's request identity and the cache identifiers of the stages up to
/// it; a stage whose result depends on the run's pipeline and variant (a
/// ``ContextSensitiveStage``) adds them.
final class LoadingLayer: RunLayer {
  struct Factory: RunLayerFactory {
    let scheduler: StageScheduler
    let ticket: PriorityTicket
    /// The group the run starts with (``Cohort/members(_:)``).
    let cohort: Cohort?

    var key: AnyHashable { "loading" }
    var order: RunLayerOrder { .work }

    func makeLayer(for run: RunPlan) -> (any RunLayer)? {
      LoadingLayer(scheduler: scheduler, ticket: ticket, cohort: cohort, run: run)
    }
  }

  let scheduler: StageScheduler
  let ticket: PriorityTicket
  let coalescer: Coalescer<String, any Sendable>?
  /// The key of the work before the first stage: the request identity.
  private let requestIdentity: String
  /// Stage index → key of the value after that stage (empty without coalescing).
  private let keys: [String]
  /// What a context-sensitive stage's key adds: the run's pipeline and variant.
  private let contextSuffix: String
  /// The group this run received its last shared value with, until its next call checks in.
  private let cohort = Protected<Cohort?>(nil)

  init(scheduler: StageScheduler, ticket: PriorityTicket, cohort: Cohort?, run: RunPlan) {
    self.scheduler = scheduler
    self.ticket = ticket
    self.cohort.withLock { $0 = cohort }
    contextSuffix = "@\(run.context.pipelineName)/\(run.context.variant ?? "")"
    guard let coalescer = scheduler.coalescer, let source = run.context.source else {
      coalescer = nil
      requestIdentity = ""
      keys = []
      return
    }
    self.coalescer = coalescer
    // The request identity: runs whose requests differ in a header value never share work.
    requestIdentity = source.requestIdentity
    var prefix = source.requestIdentity
    let suffix = contextSuffix
    keys = run.stages.map { stage in
      prefix = Self.key(after: stage, prefix: prefix, contextSuffix: suffix)
      return prefix
    }
  }

  private static func key(after stage: AnyStage, prefix: String, contextSuffix: String) -> String {
    // A writer's file name depends on the run's pipeline and variant, not only its input.
    prefix + "\u{1F}" + stage.cacheIdentifier + (stage.base is any ContextSensitiveStage ? contextSuffix : "")
  }

  /// Joins the deepest running prefix from `index` on.
  func resume(from index: Int, value: RunValue, run: RunPlan, runStage: RunPlan.StageRunner) async throws -> Resumption? {
    guard let coalescer, index < keys.count else { return nil }
    let candidates = Array(keys[index...].reversed())
    let pending = cohort.withLock { $0 }
    guard let joined = try await coalescer.joinFirstRunning(of: candidates, ticket: ticket, after: pending) else { return nil }
    cohort.withLock { $0 = joined.cohort }
    guard let result = joined.value as? RunValue else { return nil }
    return Resumption(value: result, next: keys.count - joined.index, kind: .joined)
  }

  /// Runs the call once a slot of its resource class is free; with coalescing, as shared work that
  /// runs with the highest priority of the runs waiting for it.
  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    guard let coalescer, call.index < keys.count else {
      call.announce(false)
      return try await schedule(call, ticket: ticket, next: next)
    }
    let prefix = call.index == 0 ? requestIdentity : keys[call.index - 1]
    let key = Self.key(after: call.stage, prefix: prefix, contextSuffix: contextSuffix)
    let pending = cohort.withLock { $0 }
    let shared = try await coalescer.value(for: key, ticket: ticket, after: pending, registered: { call.announce(!$0) }) {
      sharedTicket in try await self.schedule(call, ticket: sharedTicket, next: next)
    }
    cohort.withLock { $0 = shared.cohort }
    guard let result = shared.value as? RunValue else {
      throw PipelineError(.stageFailed, "shared work for stage \"\(call.stage.kind)\" returned an unexpected value")
    }
    return result
  }

  /// The run makes no more calls: it checks in with the group it last received a value with.
  func stagesEnded() {
    let pending = cohort.withLock { state -> Cohort? in
      defer { state = nil }
      return state
    }
    pending?.checkIn()
  }

  private func schedule(_ call: StageCall, ticket: PriorityTicket, next: @escaping StageCall.Next) async throws -> RunValue {
    try await scheduler.perform(call.stage.resource(for: call.input.value), context: call.context, ticket: ticket) {
      context in
      var call = call
      call.context = context
      return try await next(call)
    }
  }
}

/// A stage whose result depends on the run's pipeline name and variant as well as its input (a
/// writer naming files with `{pipeline}` or `{variant}`): shared in-flight work covering it is
/// only shared between runs of the same pipeline and variant.
package protocol ContextSensitiveStage {}
