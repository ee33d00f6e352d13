import Foundation

/// The `save` stage: writes fetched bytes unchanged into a directory (a download mirror, or the
/// runner's output for pipelines that only fetch).
///
/// Like ``Writer`` it writes atomically and keeps names inside the directory. The file name is
/// the template with `{name}` (the source's base name) and `{ext}` (the format the bytes are, as
/// sniffed). Only images of a trusted format are saved: anything else (HTML, SVG, a script a
/// server sends for an image URL) fails with `unsupportedFormat`, so a mirror never holds a file
/// under an extension the server chose.
///
/// ```swift
/// let mirror = Pipeline(name: "mirror") { Fetcher(); BytesWriter(directory: "mirror") }
/// ```
public struct BytesWriter: Stage, ContextSensitiveStage {
  public static let kind = "save"

  public var directory: String
  public var template: String
  /// The batch's record of which input wrote which file (see ``Writer/claims``).
  package var claims: OutputClaims?
  /// A queue worker's collector (see ``Writer/capture``).
  package var capture: ResultCollector?

  public init(directory: String = ".", template: String = "{name}.{ext}") {
    self.directory = directory
    self.template = template
  }

  /// A saver recording what it writes in the batch's `claims`.
  package init(directory: String, template: String, claims: OutputClaims?) {
    self.init(directory: directory, template: template)
    self.claims = claims
  }

  public var identifier: String { "save(\(directory),\(template))" + (capture.map { "@\($0.id)" } ?? "") }

  /// Writing files is disk work.
  public func resource(for input: FetchedData) -> StageResource { .disk }

  public func process(_ input: FetchedData, context: StageContext) async throws -> WrittenFile {
    // Only images of a trusted format are saved, under the extension of the format their bytes
    // are: never a name the server or the URL chose (.php, .html, .svg).
    guard let format = ImageFormat.sniff(input.bytes.prefix(64)), ImageFormat.trustedDecodable.contains(format) else {
      let found = ImageFormat.sniff(input.bytes.prefix(64)).map { "\($0.rawValue) data" } ?? "not an image of a known format"
      throw PipelineError(
        .unsupportedFormat,
        "\(input.source) is \(found); save keeps only JPEG, PNG, GIF, WebP, TIFF, HEIF and AVIF images",
        source: input.source.description)
    }
    let name = Writer.fill(template, ["{name}": input.source.name, "{ext}": format.fileExtension])
    if let problem = Writer.problems(in: name).first {
      throw PipelineError(.writeFailed, "cannot write \(name): \(problem)", source: input.source.description)
    }
    let path = (directory as NSString).appendingPathComponent(name)
    try claims?.claim(path, source: input.source, variant: context.variant, template: template)
    if let capture {
      capture.add(input.bytes, path: path, source: input.source)
      return WrittenFile(path: path, bytes: input.bytes.count)
    }
    do {
      try await context.writeOutputFile(input.bytes, named: name, in: directory)
    } catch let error as CancellationError {
      throw error
    } catch {
      throw PipelineError(
        .writeFailed, "cannot write \(path): \(error.localizedDescription)", source: input.source.description, cause: error)
    }
    return WrittenFile(path: path, bytes: input.bytes.count)
  }
}

/// A file that was written, with its size.
///
/// ```swift
/// let save = Pipeline(name: "save") { Fetcher(); BytesWriter(directory: "out") }
/// let file: WrittenFile = try await save.process(ImageSource("https://example.com/a.jpg"))
/// print(file.path, file.bytes)   // out/a.jpg 48213
/// ```
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
