import Darkroom
import DarkroomCore
import DarkroomPostgres
import Foundation

/// Runs one queued job in this process: builds its batch's pipeline (once per batch), runs every
/// variant on the source through the worker's ``ImageLoader``, and returns the outputs as results
/// under the names `darkroom run` gives its files: what its `write` and `save` stages would write
/// (relative to the output folder), and for a pipeline ending with `encode`, `{name}.{ext}` or
/// `{name}-{variant}.{ext}`. Nothing is written on this machine: the outputs are kept in a
/// ``ResultCollector`` for the queue.
final class JobRenderer: Sendable {
  let context: StageBuildContext
  let noFusion: Bool

  struct Built: Sendable {
    var variants: [BatchRunner.Variant]
    var collector: ResultCollector
  }

  /// Jobs of one source (spelled alike or not) take turns: run at once, the loader would share
  /// their work and only the first would collect the outputs.
  private let turns = Turns()

  /// Each batch's pipelines, built once, or why they cannot be.
  private let built = Protected<[UUID: Result<Built, PipelineError>]>([:])

  init(context: StageBuildContext, noFusion: Bool) {
    self.context = context
    self.noFusion = noFusion
  }

  /// The variants of `lease`'s batch, built on first use, with the collector of their outputs.
  func pipelines(for lease: JobLease) throws(PipelineError) -> Built {
    if let known = built.withLock({ $0[lease.batch] }) { return try known.get() }
    let made: Result<Built, PipelineError>
    do throws(PipelineError) {
      guard !lease.pipeline.isEmpty else {
        throw PipelineError(
          .invalidDefinition,
          "the queue holds no pipeline for batch \(lease.batch), or one over \(PostgresJobQueue.maxPipelineBytes) bytes")
      }
      let collector = ResultCollector()
      var context = context
      context.outputDirectory = "."
      context.resultCollector = collector
      context.confinesFiles = true
      let set = try PipelineDefinition.loadSet(
        json: lease.pipeline, registry: Darkroom.standardRegistry, context: context, defaultName: lease.pipelineName)
      var variants: [BatchRunner.Variant] = []
      do {
        for (graph, name) in try RunCommand.finalGraphs(set, output: ".", noFusion: noFusion, claims: nil, capture: collector) {
          variants.append(BatchRunner.Variant(name: name, pipeline: try Pipeline(graph)))
        }
      } catch {
        throw error as? PipelineError ?? PipelineError(.invalidDefinition, "\(error)")
      }
      made = .success(Built(variants: variants, collector: collector))
    } catch {
      made = .failure(
        PipelineError(error.code, "the batch's pipeline cannot be built here: \(error.message)", issues: error.issues))
    }
    built.withLock { built in
      if built.count >= 64 { built.removeAll() }  // a long-lived worker sees many batches
      built[lease.batch] = made
    }
    return try made.get()
  }

  /// Runs `lease`'s source through its batch's pipeline; the first error of any variant fails it.
  func render(_ lease: JobLease, loader: ImageLoader) async throws(PipelineError) -> [JobResult] {
    let built = try pipelines(for: lease)
    let variants = built.variants
    var source = ImageSource(lease.source)
    if !lease.name.isEmpty { source.name = lease.name }
    let turn = lease.batch.uuidString + "\u{1F}" + source.requestIdentity
    await turns.take(turn)
    defer { turns.give(turn) }
    let members = variants.count > 1 ? Cohort.members(variants.count) : []
    defer { for member in members { member.checkIn() } }
    let operations = variants.enumerated().map { index, variant in
      var options = loader.defaultRunOptions
      options.variant = variant.name
      return loader.load(source, pipeline: variant.pipeline, options: options, cohort: members.isEmpty ? nil : members[index])
    }
    var failure: PipelineError?
    await withTaskCancellationHandler {
      for operation in operations {
        if case .failure(let error) = await operation.result { failure = failure ?? error }
      }
    } onCancel: {
      for operation in operations { operation.cancel() }
    }
    let results = built.collector.take(for: source)
    if let failure { throw failure }
    return results
  }
}

/// One turn at a time per key: ``take(_:)`` waits while another holds the key's turn, in the order
/// they asked, and ``give(_:)`` hands it on.
final class Turns: Sendable {
  /// Keys whose turn is held, with those waiting for it.
  private let held = Protected<[String: [CheckedContinuation<Void, Never>]]>([:])

  func take(_ key: String) async {
    await withCheckedContinuation { continuation in
      let now = held.withLock { held -> Bool in
        guard held[key] != nil else {
          held[key] = []
          return true
        }
        held[key, default: []].append(continuation)
        return false
      }
      if now { continuation.resume() }
    }
  }

  func give(_ key: String) {
    let next = held.withLock { held -> CheckedContinuation<Void, Never>? in
      guard var waiting = held[key], !waiting.isEmpty else {
        held[key] = nil
        return nil
      }
      let next = waiting.removeFirst()
      held[key] = waiting
      return next
    }
    next?.resume()
  }
}
