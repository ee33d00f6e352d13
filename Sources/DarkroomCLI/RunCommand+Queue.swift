import ArgumentParser
import Darkroom
import DarkroomCore
import Foundation

extension RunCommand {
  /// `darkroom run … --queue URL`: enqueues the inputs as a batch, works on that batch in this
  /// process (other machines join with `darkroom worker`), waits until every job of it is done
  /// or dead, wherever it ran, and writes the outputs into --output. Run again, it recomputes
  /// nothing: the batch is found done and its outputs are written again from the queue.
  func runQueued(signals: StopSignals) async throws {
    if events != nil || stageTimeouts.count > 0 {
      Terminal.error("error: --events and --stage-timeout are not available with --queue")
      throw ExitCode.validationFailure
    }
    let plan = try await QueuePlan.make(input, output: output, noFusion: noFusion, signals: signals)
    try EnqueueCommand.requireInputs(plan)  // as `darkroom run` does, whether the queue answers or not
    let started = ContinuousClock.now
    let vips = VipsStart(threads: vipsThreads)
    var workerOptions = try WorkerOptions.parse([])
    workerOptions.jobs = jobs
    workerOptions.fetchConcurrency = fetchConcurrency
    workerOptions.timeout = timeLimit
    workerOptions.vipsThreads = vipsThreads
    let resources = PipelineResources()
    let context = StageBuildContext(outputDirectory: output, allowedRoot: root, cacheDirectory: cacheDir, resources: resources)
    let renderer = JobRenderer(context: context, noFusion: noFusion)
    let loader = workerOptions.loader()
    let options = workerOptions
    let output = output
    let batch = batch
    // This process writes the outputs of the jobs it completes at once, as `darkroom run` does;
    // the rest (done by other machines, or before) are downloaded at the end.
    let local = Protected((jobs: Set<Int64>(), names: Set<UInt64>(), failed: 0))
    // One connection pool for the enqueue, the work and the download.
    let (enqueued, total, outcome) = try await queue.withQueue("run") { queue in
      let (enqueued, total) = try await EnqueueCommand.enqueue(plan, named: batch, into: queue)
      try await vips.ready()
      var settings = options.settings(batch: enqueued.id)
      settings.reportsFailures = false  // the dead jobs are listed once, at the end
      settings.giveUpAfter = .seconds(120)  // a queue that stays away ends the run (exit 75)
      var worker = QueueWorker(queue: queue, renderer: renderer, loader: loader, settings: settings)
      worker.committed = { lease, results in
        var failed = 0
        for result in results {
          do {
            try await BatchDownload.write(result, into: output)
          } catch {
            Terminal.error("failed: \(Terminal.printable(lease.source)): \((error as? PipelineError)?.message ?? "\(error)")")
            failed += 1
          }
        }
        local.withLock { local in
          local.jobs.insert(lease.job)
          for result in results { local.names.insert(OutputPattern.key(result.name)) }
          local.failed += failed
        }
      }
      let report = await worker.run(signals: signals) {
        (try? await queue.status(of: enqueued.id).isFinished) ?? false
      }
      if signals.stopRequested || report.gaveUp != nil {
        return (enqueued, total, (report, nil as (Int, Int, Int, BatchStatus)?))
      }
      try await forEachJob(of: enqueued.id, states: [.dead], in: queue) { job in
        Terminal.error(
          "failed: \(Terminal.printable(job.source)): \(job.errorCode ?? "?"): \(Terminal.printable(job.error ?? ""))")
      }
      let mine = local.value
      let download = BatchDownload(
        queue: queue, batch: enqueued.id, output: output, skipping: mine.jobs, written: mine.names)
      return (enqueued, total, (report, try await download.run()))
    }
    await resources.close()
    let (report, download) = outcome
    let elapsed = (ContinuousClock.now - started).milliseconds / 1000
    if let error = report.gaveUp {
      Terminal.error("error: \(error.message); the batch's jobs stay queued (batch \(enqueued.id))")
      throw ExitStatus.inUseElsewhere
    }
    guard let (written, _, damaged, status) = download else {
      if !quiet {
        Terminal.error("stopped: this process did \(report.done) of batch \(enqueued.id)'s \(total) jobs; the rest stay queued")
      }
      throw ExitCode(signals.exitStatus ?? 1)
    }
    if !quiet {
      Terminal.error(
        String(
          format: "done %d, failed %d (batch %@: %d jobs, %d new, %d run here), wrote %d files, total %.2f s", status[.done],
          status[.dead], enqueued.id.uuidString, total, enqueued.added, report.done + report.failed,
          written + local.value.names.count, elapsed))
    }
    if status[.dead] > 0 || damaged > 0 || plan.problems > 0 || local.value.failed > 0 { throw ExitStatus.inputsFailed }
  }
}
