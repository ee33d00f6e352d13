import Foundation

/// One run's view of a loader's shared in-flight work: the key of every stage prefix (source
/// identity and the identifiers of the stages up to it), joining the deepest prefix already being
/// computed, and computing a prefix so that others may join it.
struct SharedWork: Sendable {
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

  init?(_ scheduling: StageScheduling?, source: ImageSource?, stages: [AnyStage]) {
    guard let scheduling else { return nil }
    scheduler = scheduling.scheduler
    ticket = scheduling.ticket
    if let coalescer = scheduling.scheduler.coalescer, let source {
      self.coalescer = coalescer
      var prefix = source.identity
      keys = stages.map { stage in
        prefix += "\u{1F}" + stage.identifier
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
    guard let joined = try await coalescer.joinFirstRunning(of: candidates, ticket: ticket) else { return nil }
    guard let result = joined.value as? Result else { return nil }
    return (keys.count - 1 - joined.index, result)
  }

  /// Runs stage `index` once a slot of its resource class is free; with coalescing, as shared work
  /// that runs with the highest priority of the runs waiting for it.
  func run(_ stage: AnyStage, index: Int, input: any Sendable, facts: ResponseFacts?, context: StageContext) async throws
    -> Result
  {
    guard let coalescer, index < keys.count else {
      return Result(value: try await scheduler.perform(stage, input: input, context: context, ticket: ticket), facts: facts)
    }
    let scheduler = scheduler
    let shared = try await coalescer.value(for: keys[index], ticket: ticket) { sharedTicket in
      let value = try await scheduler.perform(stage, input: input, context: context, ticket: sharedTicket)
      return Result(value: value, facts: facts)
    }
    guard let result = shared as? Result else {
      throw PipelineError(.stageFailed, "shared work for stage \"\(stage.kind)\" returned an unexpected value")
    }
    return result
  }
}
