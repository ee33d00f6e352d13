import Foundation

extension BatchRunner {
  /// What a batch did: the counts of the summary line, the time per image, and (with `--report`)
  /// each output and failure.
  struct Report {
    var done = 0
    var failed = 0
    /// Images cancelled by a stopping signal (not counted as failed).
    var cancelled = 0
    /// Sources never started because a signal stopped the batch.
    var notStarted = 0
    /// Inputs not run because their outputs exist and are newer (`--skip-existing`).
    var skipped = 0
    /// Notifications that a `notify` stage's sink failed to deliver (after its retries).
    var notificationsFailed = 0
    var durations: [Double] = []
    var elapsed: Double = 0
    /// Every file written, with `--report`.
    var outputs: [RunReport.Output] = []
    /// Every failure, with `--report`.
    var failures: [RunReport.Failure] = []

    /// `done 4, failed 0, 12.3 images/s, per image p50 …, total 0.33 s, peak RSS 60 MB`, then
    /// `, skipped N existing` and `, notifications failed N` when there are any (at the end, so
    /// that readers of the earlier parts are unaffected).
    var summary: String {
      let sorted = durations.sorted()
      func percentile(_ p: Double) -> String {
        guard !sorted.isEmpty else { return "-" }
        let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
        return String(format: "%.1f ms", sorted[index])
      }
      // The rate of images made: failures (a missing file fails in microseconds) would inflate it.
      let rate = elapsed > 0 ? Double(done) / elapsed : 0
      let stopped =
        (cancelled > 0 ? ", cancelled \(cancelled)" : "") + (notStarted > 0 ? ", not started \(notStarted)" : "")
      let line = String(
        format: "done %d, failed %d%@, %.1f images/s, per image p50 %@, p95 %@, total %.2f s", done, failed, stopped, rate,
        percentile(0.5), percentile(0.95), elapsed)
      return line + (Self.peakResidentMegabytes.map { ", peak RSS \($0) MB" } ?? "")
        + (skipped > 0 ? ", skipped \(skipped) existing" : "")
        + (notificationsFailed > 0 ? ", notifications failed \(notificationsFailed)" : "")
    }

    /// This process's peak resident memory (`VmHWM` in /proc/self/status), in MB. Unlike
    /// `ru_maxrss` seen by a parent, it starts afresh at exec, so it is the runner's own.
    static var peakResidentMegabytes: Int? { peakResidentKilobytes.map { ($0 + 512) / 1024 } }

    /// `VmHWM` in kB.
    static var peakResidentKilobytes: Int? {
      guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
      for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
      }
      return nil
    }
  }

  /// The progress bar: `██████░░░░ 120/1000  failed 2  35.1 images/s  ETA 0:25`. The rate counts
  /// every input finished (made or failed) since the batch started; the ETA is what is left at
  /// that rate, shown once something has finished.
  static func progressLine(_ report: (done: Int, failed: Int), total: Int, seconds: Double) -> String {
    let finished = report.done + report.failed
    let width = 30
    let filled = total > 0 ? width * min(finished, total) / total : width
    let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    let rate = seconds > 0 ? Double(finished) / seconds : 0
    let eta = rate > 0 ? clock(Double(max(0, total - finished)) / rate) : "--:--"
    return "\(bar) \(finished)/\(total)  failed \(report.failed)  " + String(format: "%.1f images/s", rate) + "  ETA \(eta)"
  }

  /// `seconds` as `m:ss`, or `h:mm:ss` from an hour (capped at 9999 hours: a rate near zero
  /// never makes a number too large to convert).
  static func clock(_ seconds: Double) -> String {
    let whole = Int(min(max(seconds, 0), 9_999 * 3_600).rounded(.up))
    let (hours, minutes, rest) = (whole / 3_600, whole / 60 % 60, whole % 60)
    return hours > 0 ? String(format: "%d:%02d:%02d", hours, minutes, rest) : String(format: "%d:%02d", minutes, rest)
  }
}
