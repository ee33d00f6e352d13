import ArgumentParser
import Darkroom
import DarkroomCore
import Foundation

/// `darkroom enqueue PIPELINE INPUT... --queue URL`: adds a batch to the shared queue.
struct EnqueueCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "enqueue", abstract: "Add inputs to the shared queue as a batch, and print the batch's id.",
    discussion: """
      Files are queued by their absolute paths (every worker must see them at the same path) and \
      URLs as they are; folders are expanded now. Outputs are named as `darkroom run` names them. \
      The same pipeline and inputs make the same batch: enqueueing them again adds nothing, and \
      nothing finished is redone. Exit status 0 when queued, 1 when an input could not be \
      taken, 2 for an invalid pipeline, 64 for a wrong command line, 75 when the queue cannot be \
      reached.
      """)

  @OptionGroup var input: BatchInputs

  @Option(help: "The batch's name (default: the pipeline's name and a digest of the pipeline and inputs).")
  var batch: String?

  @OptionGroup var queue: QueueOptions

  func validate() throws {
    try queue.require()
  }

  func run() async throws {
    let signals = StopSignals()
    let plan = try await QueuePlan.make(input, output: "out", noFusion: false, signals: signals)
    signals.stop()
    let (batch, total) = try await Self.enqueue(plan, named: batch, queue: queue)
    Terminal.out(batch.id.uuidString)
    Terminal.error("darkroom enqueue: \(batch.added) new job\(batch.added == 1 ? "" : "s"), \(total) in the batch")
    if plan.problems > 0 { throw ExitStatus.inputsFailed }
  }

  /// Enqueues `plan` as the batch `name` (or its default name); returns it and its job count.
  static func enqueue(_ plan: QueuePlan, named name: String?, queue options: QueueOptions) async throws
    -> (EnqueuedBatch, Int)
  {
    try requireInputs(plan)
    return try await options.withQueue("enqueue") { queue in try await enqueue(plan, named: name, into: queue) }
  }

  /// Enqueues the plan's jobs into an open queue: the batch and how many jobs it holds now.
  static func enqueue(_ plan: QueuePlan, named name: String?, into queue: any JobQueue) async throws -> (EnqueuedBatch, Int) {
    try requireInputs(plan)
    do throws(PipelineError) {
      let batch = try await queue.enqueue(
        batch: name ?? plan.defaultBatchName, pipeline: plan.pipelineText, pipelineName: plan.pipelineName,
        sources: plan.jobs)
      return (batch, try await queue.status(of: batch.id).total)
    } catch {
      // A queue out of reach is the caller's to report (exit 75); anything else is the batch's.
      if error.code == .queueUnavailable { throw error }
      Terminal.error("error: \(error.message)")
      throw ExitCode.validationFailure
    }
  }

  /// Fails (exit 1) when the plan has no job: before the queue is asked for anything.
  static func requireInputs(_ plan: QueuePlan) throws {
    if plan.jobs.isEmpty {
      Terminal.error("error: no inputs: the given folders hold no image files, or the input list is empty")
      throw ExitStatus.inputsFailed
    }
  }
}
