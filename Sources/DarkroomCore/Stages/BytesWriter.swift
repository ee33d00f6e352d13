import Foundation

/// The `save` stage: writes fetched bytes unchanged into a directory (a download mirror, or the
/// runner's output for pipelines that only fetch).
///
/// Like ``Writer`` it writes atomically and keeps names inside the directory. The file name is
/// the template with `{name}` (the source's base name) and `{ext}` (from the sniffed format, else
/// the source's own extension, else `bin`).
///
/// ```swift
/// let mirror = Pipeline(name: "mirror") { Fetcher(); BytesWriter(directory: "mirror") }
/// ```
public struct BytesWriter: Stage, ContextSensitiveStage {
  public static let kind = "save"

  public var directory: String
  public var template: String

  public init(directory: String = ".", template: String = "{name}.{ext}") {
    self.directory = directory
    self.template = template
  }

  public var identifier: String { "save(\(directory),\(template))" }

  /// Writing files is disk work.
  public func resource(for input: FetchedData) -> StageResource { .disk }

  public func process(_ input: FetchedData, context: StageContext) async throws -> WrittenFile {
    let sniffed = ImageFormat.sniff(input.bytes.prefix(64))?.fileExtension
    let own: String? = {
      let ext: String
      switch input.source.location {
      case .file(let path): ext = (path as NSString).pathExtension
      case .url(let url): ext = url.pathExtension
      case .malformed: ext = ""
      }
      let clean = ext.lowercased()
      return clean.isEmpty || clean.count > 8 || !clean.allSatisfy({ $0.isLetter || $0.isNumber }) ? nil : clean
    }()
    let name = template.replacingOccurrences(of: "{name}", with: input.source.name)
      .replacingOccurrences(of: "{ext}", with: sniffed ?? own ?? "bin")
    if let problem = Writer.problems(in: name).first {
      throw PipelineError(.writeFailed, "cannot write \(name): \(problem)", source: input.source.description)
    }
    let path = (directory as NSString).appendingPathComponent(name)
    try await context.blocking {
      do {
        try AtomicFile.write(input.bytes, named: name, in: directory)
      } catch {
        throw PipelineError(
          .writeFailed, "cannot write \(path): \(error.localizedDescription)", source: input.source.description, cause: error)
      }
    }
    return WrittenFile(path: path, bytes: input.bytes.count)
  }
}

/// A file that was written, with its size.
public struct WrittenFile: Sendable, PipelineValue, SummarizableOutput {
  public static let valueDescription = "a written file"
  public var path: String
  public var bytes: Int

  public init(path: String, bytes: Int) {
    self.path = path
    self.bytes = bytes
  }

  public var outputSummary: OutputSummary { OutputSummary(bytes: bytes, path: path) }
}
