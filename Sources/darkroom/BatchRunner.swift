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
  let timeout: Duration
  /// Time limits per stage kind (`--stage-timeout fetch=10`).
  let stageTimeouts: [String: Duration]
  let emitEvents: Bool
  let showProgress: Bool

  struct Report {
    var done = 0
    var failed = 0
    var durations: [Double] = []
    var elapsed: Double = 0

    var summary: String {
      let sorted = durations.sorted()
      func percentile(_ p: Double) -> String {
        guard !sorted.isEmpty else { return "-" }
        let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
        return String(format: "%.1f ms", sorted[index])
      }
      let rate = elapsed > 0 ? Double(done + failed) / elapsed : 0
      let line = String(
        format: "done %d, failed %d, %.1f images/s, per image p50 %@, p95 %@, total %.2f s", done, failed, rate, percentile(0.5),
        percentile(0.95), elapsed)
      return line + (Self.peakResidentMegabytes.map { ", peak RSS \($0) MB" } ?? "")
    }

    /// This process's peak resident memory (`VmHWM` in /proc/self/status), in MB. Unlike
    /// `ru_maxrss` seen by a parent, it starts afresh at exec, so it is the runner's own.
    static var peakResidentMegabytes: Int? {
      guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
      for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
        return kilobytes.map { ($0 + 512) / 1024 }
      }
      return nil
    }
  }

  func run(_ sources: [ImageSource]) async -> Report {
    let tally = Tally()
    let started = ContinuousClock.now
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = jobs
    configuration.networkLimit = fetchConcurrency
    configuration.timeout = timeout
    configuration.stageTimeouts = stageTimeouts
    // --events jsonl: every event as a JSON line on stdout, through a notifier (ordered, off the
    // operations' path).
    let events = emitEvents ? Notifier(sinks: [JSONLinesSink.standardOutput], events: true) : nil
    if let events { configuration.observers.append(events) }
    let loader = ImageLoader(configuration: configuration)
    let total = sources.count
    await withTaskGroup(of: Void.self) { group in
      var next = 0
      while next < total || !group.isEmpty {
        while next < total, next - tally.finishedCount < inFlight {
          let source = sources[next]
          next += 1
          group.addTask { [self] in
            await runOne(source, loader: loader, tally: tally, total: total)
          }
        }
        await group.next()
      }
    }
    await events?.close()
    if showProgress { Terminal.status("") }
    var report = tally.report
    report.elapsed = (ContinuousClock.now - started).milliseconds / 1000
    return report
  }

  private func runOne(_ source: ImageSource, loader: ImageLoader, tally: Tally, total: Int) async {
    let clock = ContinuousClock()
    let begin = clock.now
    // Every variant starts at once, so that they share the transfer and the decode.
    let operations = variants.map { variant in
      var options = loader.defaultRunOptions
      options.variant = variant.name
      return loader.load(source, pipeline: variant.pipeline, options: options)
    }
    var outcome: Result<Void, PipelineError> = .success(())
    for operation in operations {
      if case .failure(let error) = await operation.result, case .success = outcome { outcome = .failure(error) }
    }
    let snapshot = tally.record(outcome, milliseconds: (clock.now - begin).milliseconds)
    if case .failure(let error) = outcome, !emitEvents {
      if showProgress { Terminal.status("") }
      Terminal.error("failed: \(source): \(error.code): \(error.message)")
    }
    if showProgress { Terminal.status(progressLine(snapshot, total: total)) }
  }

  /// Counts outcomes from concurrent tasks.
  final class Tally: @unchecked Sendable {
    private let lock = NSLock()  // an NSLock, not a Mutex: ThreadSanitizer sees through it
    private var state = Report()  // guarded by `lock`

    var finishedCount: Int { lock.withLock { state.done + state.failed } }
    var report: Report { lock.withLock { state } }

    /// Records one source's outcome; returns the counts so far (not the whole report: a copy
    /// alive while the next source is recorded would make every append copy all durations).
    func record(_ outcome: Result<Void, PipelineError>, milliseconds: Double) -> (done: Int, failed: Int) {
      lock.withLock {
        if case .failure = outcome { state.failed += 1 } else { state.done += 1 }
        state.durations.append(milliseconds)
        return (state.done, state.failed)
      }
    }
  }

  private func progressLine(_ report: (done: Int, failed: Int), total: Int) -> String {
    let finished = report.done + report.failed
    let width = 30
    let filled = total > 0 ? width * finished / total : width
    let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    return "\(bar) \(finished)/\(total)  failed \(report.failed)"
  }
}
