import ArgumentParser
import Darkroom
import DarkroomCore
import Foundation

/// `darkroom worker --queue URL`: works jobs from the shared queue until stopped.
struct WorkerCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "worker", abstract: "Work jobs from the shared queue until stopped.",
    discussion: """
      Claims jobs of any batch, runs them, and stores their outputs in the queue (or, when larger \
      than --max-stored-bytes, in --shared-folder). The first SIGINT or SIGTERM stops claiming \
      and lets the jobs in hand finish (exit 0); a second cancels them and gives them back to the \
      queue (exit 130 or 143). When the database cannot be reached, the worker waits and \
      reconnects. Exit status 64 for a wrong command line, 75 when the queue cannot be reached at \
      start.
      """)

  @OptionGroup var queue: QueueOptions
  @OptionGroup var worker: WorkerOptions

  @Option(name: .shortAndLong, help: "Where pipelines that write their own files (a write stage) write them.")
  var output: String = "out"

  @Flag(help: "Turn off stage fusion (shrink-on-load).")
  var noFusion = false

  @Flag(help: "Stop once no job of any batch is queued or running, instead of waiting for more.")
  var exitWhenIdle = false

  func validate() throws { try queue.require() }

  func run() async throws {
    let signals = StopSignals()
    let vips = VipsStart(threads: worker.vipsThreads)
    let resources = PipelineResources()
    let context = StageBuildContext(
      outputDirectory: output, allowedRoot: worker.root, cacheDirectory: worker.cacheDir, resources: resources)
    let renderer = JobRenderer(context: context, noFusion: noFusion)
    let settings = worker.settings(batch: nil)
    let loader = worker.loader()
    let exitWhenIdle = exitWhenIdle
    let report = try await queue.withQueue("worker") { queue in
      try await vips.ready()
      let worker = QueueWorker(queue: queue, renderer: renderer, loader: loader, settings: settings)
      return await worker.run(signals: signals) {
        guard exitWhenIdle else { return false }
        return (try? await queue.openJobs()) == 0
      }
    }
    await resources.close()
    Terminal.error(
      "darkroom worker: done \(report.done), failed \(report.failed), lost \(report.lost), given back \(report.released)")
    if signals.cancelRequested, let status = signals.exitStatus { throw ExitCode(status) }
  }
}
