import Foundation

/// One run's view of a loader's shared in-flight work: the key of every stage prefix (source
/// identity and the identifiers of the stages up to it), joining the deepest prefix already being
/// computed, and computing a prefix so that others may join it.
final class SharedWork: Sendable {
  /// A computed prefix value and what the fetch said about freshness, so that a run joining after
  /// the fetch still stores its own checkpoints with the right lifetime.
  struct Result: Sendable {
    var value: any Sendable
    var facts: ResponseFacts?
  }

  let scheduler: StageScheduler
  let ticket: PriorityTicket
  let coalescer: Coalescer<String, any Sendable>?
  /// Stage index → key of the value after that stage (empty without coalescing).
  let keys: [String]
  /// The group this run received its last shared value with, until its next call checks in.
  private let cohort = Protected<Cohort?>(nil)

  init?(
    _ scheduling: StageScheduling?, source: ImageSource?, stages: [AnyStage], pipeline: String, variant: String?,
    cohort: Cohort? = nil
  ) {
    guard let scheduling else { return nil }
    self.cohort.withLock { $0 = cohort }
    scheduler = scheduling.scheduler
    ticket = scheduling.ticket
    if let coalescer = scheduling.scheduler.coalescer, let source {
      self.coalescer = coalescer
      // The request identity: runs whose requests differ in a header value never share work.
      var prefix = source.requestIdentity
      keys = stages.map { stage in
        prefix += "\u{1F}" + stage.cacheIdentifier
        // A writer's file name depends on the run's pipeline and variant, not only its input.
        if stage.base is any ContextSensitiveStage { prefix += "@\(pipeline)/\(variant ?? "")" }
        return prefix
      }
    } else {
      coalescer = nil
      keys = []
    }
  }

  /// Joins the deepest running prefix from `index` on: the last stage it covers and its result.
  func joinDeepest(from index: Int) async throws -> (through: Int, result: Result)? {
    guard let coalescer, index < keys.count else { return nil }
    let candidates = Array(keys[index...].reversed())
    let pending = cohort.withLock { $0 }
    guard let joined = try await coalescer.joinFirstRunning(of: candidates, ticket: ticket, after: pending) else { return nil }
    cohort.withLock { $0 = joined.cohort }
    guard let result = joined.value as? Result else { return nil }
    return (keys.count - 1 - joined.index, result)
  }

  /// The run makes no more calls: it checks in with the group it last received a value with.
  func finish() {
    let pending = cohort.withLock { state -> Cohort? in
      defer { state = nil }
      return state
    }
    pending?.checkIn()
  }

  /// Runs stage `index` once a slot of its resource class is free; with coalescing, as shared work
  /// that runs with the highest priority of the runs waiting for it.
  ///
  /// `announce` is told, as soon as it is known, whether this run joined work already running.
  func run(
    _ stage: AnyStage, index: Int, input: any Sendable, facts: ResponseFacts?, context: StageContext,
    announce: @escaping @Sendable (_ joined: Bool) -> Void
  ) async throws -> Result {
    guard let coalescer, index < keys.count else {
      announce(false)
      return Result(value: try await scheduler.perform(stage, input: input, context: context, ticket: ticket), facts: facts)
    }
    let scheduler = scheduler
    let pending = cohort.withLock { $0 }
    let shared = try await coalescer.value(for: keys[index], ticket: ticket, after: pending, registered: { announce(!$0) }) {
      sharedTicket in
      let value = try await scheduler.perform(stage, input: input, context: context, ticket: sharedTicket)
      return Result(value: value, facts: facts)
    }
    cohort.withLock { $0 = shared.cohort }
    guard let result = shared.value as? Result else {
      throw PipelineError(.stageFailed, "shared work for stage \"\(stage.kind)\" returned an unexpected value")
    }
    return result
  }
}

/// A stage whose result depends on the run's pipeline name and variant as well as its input (a
/// writer naming files with `{pipeline}` or `{variant}`): shared in-flight work covering it is
/// only shared between runs of the same pipeline and variant.
public protocol ContextSensitiveStage {}
