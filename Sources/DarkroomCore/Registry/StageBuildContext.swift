import Foundation

/// Settings from whoever loads a definition (the runner, a server) that stages may need when they
/// are created: where outputs go, which directory local sources must stay inside, and the
/// ``PipelineResources`` that keeps what the stages open (notifiers, cache stores) for the caller.
///
/// ```swift
/// let resources = PipelineResources()
/// let context = StageBuildContext(outputDirectory: "out", allowedRoot: "/srv/images", resources: resources)
/// let graph = try PipelineDefinition.load(contentsOf: "thumb.json", registry: .standard, context: context)
/// …
/// await resources.close()
/// ```
public struct StageBuildContext: Sendable {
  /// The directory `write` stages write into (the runner's `--output`).
  public var outputDirectory: String?
  /// When set, local sources must resolve (after symlinks) to a path inside this directory.
  public var allowedRoot: String?
  /// Where `cache` stages with a relative (or no) `directory` keep disk stores and image tables
  /// (the runner's `--cache-dir`); the working directory when unset.
  public var cacheDirectory: String?
  /// True when a definition is only validated (`darkroom validate`): factories should not open
  /// or create anything (cache stores, directories).
  public var validatingOnly: Bool
  /// Free-form settings for user stages.
  public var values: [String: String]
  /// The batch's record of which input wrote which file, given to `write` and `save` stages (the
  /// runner sets one per run): a second input mapped onto another's file fails instead of
  /// overwriting it.
  package var outputClaims: OutputClaims?
  /// A queue worker's collector: `write` and `save` stages keep their outputs there as results.
  package var resultCollector: ResultCollector?
  /// Whether the pipeline came from outside (a queue's database) and may only touch this
  /// machine's files where the process says: caches inside ``cacheDirectory``, no notification
  /// files.
  package var confinesFiles = false
  /// Whether cache stages open only stores that exist (`darkroom cache`: inspecting a store that
  /// was never made must not make an empty one); a missing one fails with `notFound`.
  package var opensExistingStoresOnly = false
  /// Where factories register the notifiers and cache stores they open, for the caller to purge
  /// and close. A context made without one has a fresh ``PipelineResources`` that only it holds:
  /// what it opens then belongs to the stages built (a notifier let go delivers what it holds and
  /// closes its sinks on its own), and nothing waits for delivery before the process exits.
  public var resources: PipelineResources

  public init(
    outputDirectory: String? = nil, allowedRoot: String? = nil, cacheDirectory: String? = nil, validatingOnly: Bool = false,
    values: [String: String] = [:], resources: PipelineResources = PipelineResources()
  ) {
    self.resources = resources
    self.outputDirectory = outputDirectory
    self.allowedRoot = allowedRoot
    self.cacheDirectory = cacheDirectory
    self.validatingOnly = validatingOnly
    self.values = values
  }

  /// A cache directory option resolved against ``cacheDirectory``.
  public func resolveCacheDirectory(_ directory: String?) -> String {
    let base = cacheDirectory ?? FileManager.default.currentDirectoryPath
    guard let directory, !directory.isEmpty else { return (base as NSString).appendingPathComponent(".darkroom-cache") }
    return directory.hasPrefix("/") ? directory : (base as NSString).appendingPathComponent(directory)
  }
}
