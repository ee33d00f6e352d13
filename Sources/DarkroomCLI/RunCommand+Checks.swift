import ArgumentParser
import Darkroom
import Foundation

/// `darkroom run`'s checks of its command line: number bounds, `--stage-timeout` kinds, and the
/// note on what the input folders held that was not taken.
extension RunCommand {
  /// The bounds of the number options: every value is checked before any arithmetic on it.
  enum Bounds {
    static let jobs = 1...256
    static let fetchConcurrency = 1...1024
    static let vipsThreads = 1...64
    /// Seconds, for --timeout and --stage-timeout: a microsecond up to a day.
    static let seconds = 0.000_001...86_400.0

    /// `seconds` (in `Bounds.seconds`) as a duration, to the microsecond.
    static func duration(_ seconds: Double) -> Duration { .microseconds(Int64((seconds * 1_000_000).rounded())) }
  }

  func validate() throws {
    if let jobs { try Self.check("--jobs", jobs, Bounds.jobs) }
    try Self.check("--fetch-concurrency", fetchConcurrency, Bounds.fetchConcurrency)
    try Self.check("--vips-threads", vipsThreads, Bounds.vipsThreads)
    guard Bounds.seconds.contains(timeLimit) else {  // NaN is in no range
      throw ValidationError("--timeout takes seconds from 0.000001 to 86400 (a day), got \(timeLimit)")
    }
    _ = try parsedStageTimeouts()
    try validateRunFiles()
  }

  static func check(_ name: String, _ value: Int, _ range: ClosedRange<Int>) throws {
    guard range.contains(value) else {
      throw ValidationError("\(name) takes \(range.lowerBound) to \(range.upperBound), got \(value)")
    }
  }

  /// Refuses (exit 64) a `--stage-timeout` for a kind that no stage of the pipeline has, fused or
  /// not: a misspelt kind would otherwise bound nothing, silently.
  static func checkStageTimeouts(_ limits: [String: Duration], against graphs: [StageGraph]) throws {
    let kinds = Set(graphs.flatMap { graph in graph.stages.flatMap { [$0.kind] + $0.fusedKinds } })
    let unknown = limits.keys.filter { !kinds.contains($0) }.sorted()
    guard unknown.isEmpty else {
      throw ValidationError(
        "--stage-timeout names \(unknown.map { Terminal.printable($0) }.joined(separator: ", ")), not a stage of this pipeline "
          + "(its stages: \(kinds.sorted().joined(separator: ", ")))")
    }
  }

  /// Says what the folders held that was not taken: a count (unless `quiet`), and each file with
  /// `verbose`.
  static func reportSkipped(_ skipped: [InputExpander.Skipped], quiet: Bool, verbose: Bool) {
    guard !skipped.isEmpty else { return }
    if verbose {
      for file in skipped {
        Terminal.error("skipped: \(Terminal.printable(file.path)): \(file.hidden ? "hidden" : "not an image")")
      }
    }
    guard !quiet else { return }
    let hidden = skipped.filter(\.hidden).count
    let parts = [(skipped.count - hidden, "not an image"), (hidden, "hidden")].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }
    Terminal.error(
      "note: skipped \(skipped.count) entr\(skipped.count == 1 ? "y" : "ies") in the folders: \(parts.joined(separator: ", "))"
        + (verbose ? "" : " (--verbose lists them)"))
  }

  /// `--stage-timeout fetch=10` as stage kind → duration.
  func parsedStageTimeouts() throws -> [String: Duration] {
    var limits: [String: Duration] = [:]
    for item in stageTimeouts {
      let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
      guard parts.count == 2, !parts[0].isEmpty, let seconds = Double(parts[1]), Bounds.seconds.contains(seconds) else {
        throw ValidationError(
          "--stage-timeout takes KIND=SECONDS with SECONDS from 0.000001 to 86400 (a day), e.g. fetch=10; got \"\(Terminal.printable(item))\""
        )
      }
      limits[parts[0]] = Bounds.duration(seconds)
    }
    return limits
  }
}
