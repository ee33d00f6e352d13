import Foundation

/// Where `write` and `save` stages put their outputs when a queue worker runs them: kept in memory
/// under their file names, relative to the output directory, per source, for the worker to store
/// as the job's results instead of files on its own disk.
///
/// Stages that capture carry the collector's id in their identifiers, so that work of two
/// batches is never shared up to and including a capture.
///
/// ```swift
/// let collector = ResultCollector()
/// var context = StageBuildContext(outputDirectory: ".")
/// context.resultCollector = collector
/// // … run the job's source through pipelines built in `context` …
/// let results = collector.take(for: source)   // [JobResult(name: "a.jpg", …)]
/// ```
package final class ResultCollector: Sendable {
  package let id = UUID()
  private let outputs = Protected<[String: [JobResult]]>([:])

  package init() {}

  /// Records an output of `source` at `path` (the writer's path: its output directory, `.`,
  /// joined with the file name).
  package func add(_ bytes: ImageBytes, path: String, source: ImageSource, overwrite: Bool = true) {
    var name = path
    while name.hasPrefix("./") { name.removeFirst(2) }
    let result = JobResult(bytes: bytes.withUnsafeBytes { Array($0) }, name: name, overwrite: overwrite)
    outputs.withLock { $0[source.requestIdentity, default: []].append(result) }
  }

  /// The outputs recorded for `source`, forgotten here.
  package func take(for source: ImageSource) -> [JobResult] {
    outputs.withLock { $0.removeValue(forKey: source.requestIdentity) ?? [] }
  }
}
