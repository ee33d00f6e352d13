/// The one error type every Darkroom failure is reported as.
///
/// A `PipelineError` says what went wrong in a sentence a person can act on, and carries the
/// structured facts a program needs: a stable ``Code``, the stage that failed (kind and
/// configuration identifier), the source being processed, the JSON path of a bad pipeline
/// definition, and the underlying cause (for example the text of libvips' error buffer).
///
/// ```swift
/// do {
///   _ = try await pipeline.run(ImageSource("photo.jpg")).value
/// } catch let error as PipelineError where error.code == .imageTooLarge {
///   print("refused:", error.message)
/// }
/// ```
public struct PipelineError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is; stable strings for logs, events and exit handling.
  public var code: Code
  /// A sentence that says what happened and, where possible, what would fix it.
  public var message: String
  /// The kind of the stage that failed (`"decode"`, `"resize"`…), when a stage failed.
  public var stageKind: String?
  /// The configuration identifier of the stage that failed.
  public var stageIdentifier: String?
  /// The source (path or redacted URL) the operation was processing.
  public var source: String?
  /// Where in a JSON pipeline definition the problem is (`stages[2].width`).
  public var path: String?
  /// Every problem found when a definition was validated (one entry when there was only one).
  public var issues: [Issue]
  /// The HTTP status, for `httpStatus` failures.
  public var httpStatus: Int?
  /// The underlying error or library message, kept for logs and debugging.
  public var cause: (any Error & Sendable)?

  /// Creates an error.
  public init(
    _ code: Code, _ message: String, stageKind: String? = nil, stageIdentifier: String? = nil,
    source: String? = nil, path: String? = nil, issues: [Issue] = [], cause: (any Error & Sendable)? = nil
  ) {
    self.code = code
    self.message = message
    self.stageKind = stageKind
    self.stageIdentifier = stageIdentifier
    self.source = source
    self.path = path
    self.issues = issues
    self.cause = cause
    self.httpStatus = nil
  }

  /// One problem of a pipeline definition: where it is and what is wrong.
  public struct Issue: Sendable, Equatable, CustomStringConvertible {
    /// The code of this problem (`unknownStage`, `typeMismatch`, `invalidDefinition`…).
    public var code: Code
    /// The JSON path (`stages[1].quality`), or `""` for the document itself.
    public var path: String
    /// What is wrong and how to fix it.
    public var message: String

    public init(code: Code, path: String, message: String) {
      self.code = code
      self.path = path
      self.message = message
    }

    public var description: String { path.isEmpty || message.hasPrefix(path) ? message : "\(path): \(message)" }
  }

  public var description: String {
    var text = "\(code.rawValue): \(message)"
    if let source, !message.contains(source) { text += " (source: \(source))" }
    if let cause { text += " [cause: \(String(describing: cause))]" }
    return text
  }

  /// A copy with the stage and source filled in where they were not set yet.
  public func attributed(stageKind: String?, stageIdentifier: String?, source: String?) -> PipelineError {
    var copy = self
    if copy.stageKind == nil { copy.stageKind = stageKind }
    if copy.stageIdentifier == nil { copy.stageIdentifier = stageIdentifier }
    if copy.source == nil { copy.source = source }
    return copy
  }
}

/// A plain-text cause, for failures reported by C libraries as messages.
///
/// ```swift
/// let cause = LibraryMessage(library: "libvips", text: "VipsJpeg: premature end of file")
/// cause.description   // "libvips: VipsJpeg: premature end of file"
/// throw PipelineError(.corruptImage, "cannot decode photo.jpg", cause: cause)
/// ```
public struct LibraryMessage: Error, Sendable, CustomStringConvertible, Equatable {
  /// The library that reported it (`"libvips"`, `"libcurl"`, `"posix"`).
  public var library: String
  /// The text the library reported.
  public var text: String

  public init(library: String, text: String) {
    self.library = library
    self.text = text
  }

  public var description: String { "\(library): \(text)" }
}
