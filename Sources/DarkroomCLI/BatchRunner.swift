import Darkroom
import Foundation

/// Runs a graph over many sources through an ``ImageLoader`` — CPU work `jobs` at a time,
/// transfers `fetchConcurrency` at a time, identical work shared — with progress and a summary.
struct BatchRunner {
  /// What each source is run through: one pipeline, or one per variant (sharing their prefix's work).
  struct Variant: Sendable {
    var name: String?
    var pipeline: Pipeline<ImageSource, any Sendable>
  }

  let variants: [Variant]
  /// Stage work on the CPU at once (the loader's CPU class and pool).
  let jobs: Int
  /// Network transfers at once (the loader's network class).
  let fetchConcurrency: Int
  /// Operations in flight: more than `jobs`, so transfers run ahead of the CPU work.
  let inFlight: Int
  /// CPU stage calls let in beyond `jobs`, to wait in the CPU pool's queue
  /// (``ImageLoader/Configuration/cpuQueued``).
  let cpuQueued: Int
  let timeout: Duration
  /// Time limits per stage kind (`--stage-timeout fetch=10`).
  let stageTimeouts: [String: Duration]
  let emitEvents: Bool
  let showProgress: Bool
  /// Whether each output and failure is kept in the report (`--report`).
  var recordsOutputs = false

  /// Runs every source; with `signals`, a first signal starts nothing new and a second cancels what
  /// is in flight (the report counts what did not start). The sources must be distinct by request
  /// identity (``OutputNaming/distinct(_:)``): with one variant, no work is shared between them.
  func run(_ sources: [ImageSource], signals: StopSignals? = nil) async -> Report {
    let tally = Tally()
    let started = ContinuousClock.now
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = jobs
    configuration.cpuQueued = cpuQueued
    configuration.networkLimit = fetchConcurrency
    configuration.timeout = timeout
    configuration.stageTimeouts = stageTimeouts
    // The sources are distinct (an input given twice runs once), so runs of one variant have no
    // work to share: coalescing would only key and register every stage call, 40 µs a fetch
    // (Docs/Performance.md, "Thirteenth stop"). Variants of one source share their prefix.
    configuration.coalescing = variants.count > 1
    // --events jsonl: every event as a JSON line on stdout, through a notifier (ordered, off the
    // operations' path).
    let events = emitEvents ? Notifier(sinks: [JSONLinesSink.standardOutput], events: true) : nil
    if let events { configuration.observers.append(events) }
    let loader = ImageLoader(configuration: configuration)
    let total = sources.count
    let work = Task { [self] in
      await withTaskGroup(of: Void.self) { group in
        var next = 0
        func mayStart() -> Bool { next < total && !Task.isCancelled && !(signals?.stopRequested ?? false) }
        while mayStart() || !group.isEmpty {
          while mayStart(), next - tally.finishedCount < inFlight {
            // A stalled reader of --events holds the batch back instead of the events piling up.
            await events?.waitUntilPending(below: Self.maxPendingEvents)
            guard mayStart() else { break }
            let source = sources[next]
            next += 1
            group.addTask { [self] in
              await runOne(source, loader: loader, tally: tally, total: total)
            }
          }
          await group.next()
        }
        tally.setNotStarted(total - next)
      }
    }
    signals?.onCancel { work.cancel() }
    await work.value
    // After a cancelling signal, events still queued for a reader that may never read them are
    // dropped rather than waited for.
    if !work.isCancelled { await events?.close() }
    if showProgress { Terminal.status("") }
    var report = tally.report
    report.elapsed = (ContinuousClock.now - started).milliseconds / 1000
    return report
  }

  /// Events queued for `--events` beyond which no new image starts (a few per image in flight
  /// come on top).
  static let maxPendingEvents = 1_000

  private func runOne(_ source: ImageSource, loader: ImageLoader, tally: Tally, total: Int) async {
    let clock = ContinuousClock()
    let begin = clock.now
    // Every variant starts at once, as one cohort, so that they share the transfer and the decode
    // however their tasks are scheduled.
    let members = variants.count > 1 ? Cohort.members(variants.count) : []
    defer { for member in members { member.checkIn() } }  // runs that ended without a shared call
    let operations = variants.enumerated().map { index, variant in
      var options = loader.defaultRunOptions
      options.variant = variant.name
      return loader.load(
        source, pipeline: variant.pipeline, options: options, cohort: members.isEmpty ? nil : members[index])
    }
    var outcome: Result<Void, PipelineError> = .success(())
    await withTaskCancellationHandler {
      for operation in operations {
        if case .failure(let error) = await operation.result, case .success = outcome { outcome = .failure(error) }
      }
    } onCancel: {
      for operation in operations { operation.cancel() }
    }
    let milliseconds = (clock.now - begin).milliseconds
    if recordsOutputs { await record(operations, of: source, milliseconds: milliseconds, in: tally) }
    let snapshot = tally.record(outcome, milliseconds: milliseconds)
    if case .failure(let error) = outcome, error.code != .cancelled, !emitEvents {
      if showProgress { Terminal.status("") }
      Terminal.error("failed: \(Terminal.printable(source.description)): \(error.code): \(Terminal.printable(error.message))")
    }
    if showProgress { Terminal.status(Self.progressLine(snapshot, total: total, seconds: tally.elapsedSeconds)) }
  }

  /// Keeps what each variant of `source` wrote (path, size, format, bytes) or why it failed.
  private func record(
    _ operations: [PipelineOperation<any Sendable>], of source: ImageSource, milliseconds: Double, in tally: Tally
  ) async {
    for (index, operation) in operations.enumerated() {
      let variant = variants[index].name
      switch await operation.result {
      case .success(let value):
        guard let summary = outputSummary(of: value), let path = summary.path else { continue }
        tally.add(
          RunReport.Output(
            source: source.description, variant: variant, path: path, width: summary.width, height: summary.height,
            format: summary.format, bytes: summary.bytes, milliseconds: (milliseconds * 100).rounded() / 100))
      case .failure(let error) where error.code != .cancelled:
        tally.add(
          RunReport.Failure(
            source: source.description, variant: variant, code: "\(error.code)", message: error.message, stage: error.stageKind))
      case .failure:
        continue
      }
    }
  }

  /// Counts outcomes from concurrent tasks.
  final class Tally: Sendable {
    private let state = Protected(Report())
    private let started = ContinuousClock.now

    /// Seconds since the tally was made (the batch's start).
    var elapsedSeconds: Double { (ContinuousClock.now - started).milliseconds / 1000 }

    var finishedCount: Int { state.withLock { $0.done + $0.failed + $0.cancelled } }
    var report: Report { state.value }

    /// Records one source's outcome; returns the counts so far (not the whole report: a copy
    /// alive while the next source is recorded would make every append copy all durations).
    func record(_ outcome: Result<Void, PipelineError>, milliseconds: Double) -> (done: Int, failed: Int) {
      state.withLock { state in
        switch outcome {
        case .success: state.done += 1
        case .failure(let error) where error.code == .cancelled: state.cancelled += 1
        case .failure: state.failed += 1
        }
        state.durations.append(milliseconds)
        return (state.done + state.cancelled, state.failed)
      }
    }

    func setNotStarted(_ count: Int) { state.withLock { $0.notStarted = count } }

    func add(_ output: RunReport.Output) { state.withLock { $0.outputs.append(output) } }
    func add(_ failure: RunReport.Failure) { state.withLock { $0.failures.append(failure) } }
  }
}
