import Foundation

/// The `write` stage: writes an encoded image into a directory under a templated file name.
///
/// The file appears whole or not at all: bytes go to a temporary file in the same directory which
/// is then renamed into place. Placeholders: `{name}` (the source's base name), `{variant}` (the
/// variant, or the pipeline name when there are no variants), `{pipeline}`, `{width}`, `{height}`,
/// `{format}`, `{ext}`. A template may create subdirectories but never leave the directory.
///
/// ```swift
/// let write = Writer(directory: "out", template: "{name}-{width}.{ext}")
/// ```
public struct Writer: Stage, ContextSensitiveStage {
  public static let kind = "write"

  public var directory: String
  public var template: String
  public var overwrite: Bool
  /// The batch's record of which input wrote which file: with it, a second input mapped onto a
  /// file already written for another fails instead of overwriting it (``OutputClaims``).
  package var claims: OutputClaims?
  /// A queue worker's collector: with it, the image is kept there as a result instead of written.
  package var capture: ResultCollector?

  public static let defaultTemplate = "{name}.{ext}"

  public init(
    directory: String = ".", template: String = Writer.defaultTemplate, overwrite: Bool = true
  ) {
    self.directory = directory
    self.template = template
    self.overwrite = overwrite
  }

  /// A writer recording what it writes in the batch's `claims`.
  package init(directory: String, template: String, overwrite: Bool, claims: OutputClaims?) {
    self.init(directory: directory, template: template, overwrite: overwrite)
    self.claims = claims
  }

  public var identifier: String {
    "write(\(directory),\(template)\(overwrite ? "" : ",keep"))" + (capture.map { "@\($0.id)" } ?? "")
  }

  /// The file name for an image, from the template.
  public func fileName(for image: EncodedImage, pipeline: String, variant: String? = nil) -> String {
    let values = [
      "{name}": image.source.name, "{variant}": variant ?? pipeline, "{pipeline}": pipeline, "{width}": String(image.width),
      "{height}": String(image.height), "{format}": image.format.rawValue, "{ext}": image.format.fileExtension,
    ]
    return Writer.fill(template, values)
  }

  /// `template` with each known `{placeholder}` replaced, in one pass from the left: a value is
  /// never searched for placeholders itself (a pipeline named `p{width}` stays `p{width}`), so the
  /// name does not depend on the order the values are tried in.
  package static func fill(_ template: String, _ values: [String: String]) -> String {
    pieces(template, values).map { $0 ?? "" }.joined()
  }

  /// `template` read as ``fill(_:_:)`` reads it, cut at each `open` placeholder, which is left
  /// unfilled (`nil` in its place): the text between them with every other known placeholder
  /// filled. Without `open`, one piece: the filled template.
  package static func pieces(_ template: String, _ values: [String: String], leavingOpen open: String? = nil) -> [String?] {
    var pieces: [String?] = []
    var literal = ""
    var rest = Substring(template)
    while let brace = rest.firstIndex(of: "{") {
      literal += rest[..<brace]
      guard let close = rest[brace...].firstIndex(of: "}") else {
        literal.append("{")
        rest = rest[rest.index(after: brace)...]
        continue
      }
      let placeholder = String(rest[brace...close])
      if placeholder == open {
        pieces += [literal, nil]
        literal = ""
      } else if let value = values[placeholder] {
        literal += value
      } else {
        literal.append("{")
        rest = rest[rest.index(after: brace)...]
        continue
      }
      rest = rest[rest.index(after: close)...]
    }
    return pieces + [literal + rest]
  }

  /// Checks a template: it must name a file inside the directory.
  public static func problems(in template: String) -> [String] {
    var problems: [String] = []
    if template.hasPrefix("/") { problems.append("the template must be a relative file name, not an absolute path") }
    if template.split(separator: "/").contains("..") {
      problems.append("the template may not contain \"..\": outputs stay inside the output directory")
    }
    if template.isEmpty || template.hasSuffix("/") { problems.append("the template must end with a file name") }
    // A file name ends at a NUL for the system: the outputs would all be written to its prefix.
    if template.utf8.contains(0) { problems.append("the template may not contain a NUL character (\\u0000)") }
    let known = ["name", "variant", "pipeline", "width", "height", "format", "ext"]
    var rest = Substring(template)
    while let open = rest.firstIndex(of: "{") {
      guard let close = rest[open...].firstIndex(of: "}") else {
        problems.append("unclosed \"{\" in the template")
        break
      }
      let name = String(rest[rest.index(after: open)..<close])
      if !known.contains(name) {
        problems.append("unknown placeholder {\(name)}; known: " + known.map { "{\($0)}" }.joined(separator: ", "))
      }
      rest = rest[rest.index(after: close)...]
    }
    return problems
  }

  /// Writing files is disk work.
  public func resource(for input: EncodedImage) -> StageResource { .disk }

  public func process(_ image: EncodedImage, context: StageContext) async throws -> WrittenImage {
    let name = fileName(for: image, pipeline: context.pipelineName, variant: context.variant)
    if let problem = Writer.problems(in: name).first {
      throw PipelineError(.writeFailed, "cannot write \(name): \(problem)", source: image.source.description)
    }
    let path = (directory as NSString).appendingPathComponent(name)
    try claims?.claim(path, source: image.source, variant: context.variant, template: template)
    if let capture {
      capture.add(image.bytes, path: path, source: image.source, overwrite: overwrite)
      return WrittenImage(image: image, path: path)
    }
    do {
      // Beneath the directory: no symlink inside it is followed (see AtomicFile).
      try await context.writeOutputFile(image.bytes, named: name, in: directory, overwrite: overwrite)
    } catch let error as NSError where !overwrite && error.domain == NSPOSIXErrorDomain && error.code == Int(EEXIST) {
      throw PipelineError(.writeFailed, "\(path) exists and overwrite is off", source: image.source.description)
    } catch let error as CancellationError {
      throw error
    } catch {
      throw PipelineError(
        .writeFailed, "cannot write \(path): \(error.localizedDescription)", source: image.source.description, cause: error)
    }
    return WrittenImage(image: image, path: path)
  }
}
