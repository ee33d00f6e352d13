import ArgumentParser
import Darkroom

/// Loads a pipeline file for a command that runs it or opens its caches, and says on stderr why
/// it cannot be loaded.
enum PipelineFile {
  /// The pipeline set in `path`, its stages built in `context`.
  ///
  /// Fails with exit status 2 (``ExitStatus/invalidPipeline``) for a file that is invalid, and
  /// with 75 (``ExitStatus/inUseElsewhere``) when the file is fine but a cache store it names is
  /// locked by another process (an image table another run has open): that run ending is all it
  /// takes, so it is not called an invalid pipeline. A library that cannot be loaded (libvips,
  /// for an overlay's watermark) fails with 1: the installation is at fault, not the file.
  static func load(_ path: String, context: StageBuildContext) throws(ExitCode) -> PipelineSet {
    do {
      return try PipelineDefinition.loadSet(contentsOf: path, registry: Darkroom.standardRegistry, context: context)
    } catch {
      let codes = error.codes
      if codes.allSatisfy({ $0 == .cacheInUse }) {
        Terminal.error(
          "error: cannot open a cache: \(error.message); "
            + "try again once that process has ended, or give this run another --cache-dir")
        throw ExitStatus.inUseElsewhere
      }
      if context.opensExistingStoresOnly, codes.allSatisfy({ $0 == .notFound }) {
        // `darkroom cache` on a store never made: said, and nothing made.
        for issue in error.issues { Terminal.error("darkroom cache: \(issue.message)") }
        throw ExitCode.failure
      }
      if codes.contains(.libraryUnavailable) {
        // An overlay's watermark is decoded as the file loads: the installation is at fault.
        Terminal.error("error: \(error.message)")
        throw ExitCode.failure
      }
      Terminal.error("error: invalid pipeline: \(error.message)")
      throw ExitStatus.invalidPipeline
    }
  }
}

extension PipelineError {
  /// The codes of every problem (a file's invalid stages are issues of one error), or the error's own.
  var codes: [Code] { issues.isEmpty ? [code] : issues.map(\.code) }
}
