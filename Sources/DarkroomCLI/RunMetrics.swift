import Foundation

/// What `darkroom run … --metrics FILE` writes at the end of a run: Prometheus' text exposition
/// format (0.0.4), for node_exporter's textfile collector. Every sample has the label
/// `pipeline` (the pipeline's name, escaped as the format says: `\\`, `\"` and `\n`).
///
/// Written by hand rather than through swift-prometheus' registry: the runner writes a handful of
/// values once, into a file that must appear whole (``AtomicFile``), and the registry would only
/// add a dependency to the runner's target.
struct RunMetrics {
  var pipeline: String
  var done: Int
  var failed: Int
  var cancelled: Int
  var notStarted: Int
  var skipped: Int
  var notificationsFailed: Int
  /// Milliseconds per image.
  var durations: [Double]
  var seconds: Double
  var peakResidentBytes: Int?
  var finishedAt: Date

  /// Upper bounds of the histogram's buckets, in seconds.
  static let buckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

  /// `value` as a label value in the text format.
  static func escapeLabel(_ value: String) -> String { value.escaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n"]) }

  /// A number as the format writes it (`+Inf`, `NaN`, or Swift's shortest round-tripping form).
  static func number(_ value: Double) -> String {
    if value.isNaN { return "NaN" }
    if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
    return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
  }

  var text: String {
    let pipelineLabel = "pipeline=\"\(Self.escapeLabel(pipeline))\""
    var lines: [String] = []
    func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, String, Double)]) {
      lines.append("# HELP \(name) \(help)")
      lines.append("# TYPE \(name) \(type)")
      for (suffix, labels, value) in samples {
        lines.append("\(name)\(suffix){\(pipelineLabel)\(labels.isEmpty ? "" : "," + labels)} \(Self.number(value))")
      }
    }
    family(
      "darkroom_run_images_total", "counter", "Inputs of the run by outcome.",
      [
        ("", "outcome=\"done\"", Double(done)), ("", "outcome=\"failed\"", Double(failed)),
        ("", "outcome=\"cancelled\"", Double(cancelled)), ("", "outcome=\"not_started\"", Double(notStarted)),
        ("", "outcome=\"skipped\"", Double(skipped)),
      ])
    family(
      "darkroom_run_notifications_failed_total", "counter", "Notifications a notify stage's sinks failed to deliver.",
      [("", "", Double(notificationsFailed))])
    let seconds = durations.map { $0 / 1000 }
    var samples = Self.buckets.map { bound in
      ("_bucket", "le=\"\(Self.number(bound))\"", Double(seconds.filter { $0 <= bound }.count))
    }
    samples.append(("_bucket", "le=\"+Inf\"", Double(seconds.count)))
    samples.append(("_sum", "", seconds.reduce(0, +)))
    samples.append(("_count", "", Double(seconds.count)))
    family("darkroom_run_image_duration_seconds", "histogram", "Seconds per input (all its variants).", samples)
    family("darkroom_run_duration_seconds", "gauge", "Seconds the run took.", [("", "", self.seconds)])
    if let peakResidentBytes {
      family(
        "darkroom_run_peak_resident_bytes", "gauge", "The runner's peak resident memory (VmHWM).",
        [("", "", Double(peakResidentBytes))])
    }
    family(
      "darkroom_run_last_finish_timestamp_seconds", "gauge", "When the run ended (Unix time).",
      [("", "", finishedAt.timeIntervalSince1970.rounded())])
    return lines.joined(separator: "\n") + "\n"
  }
}
