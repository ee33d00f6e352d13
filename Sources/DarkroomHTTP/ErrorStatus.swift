import DarkroomCore

extension PipelineError.Code {
  /// A signed URL whose signature does not match its path (or an `unsafe` URL where those are off).
  public static let badSignature = Self("badSignature")
  /// The server is at its limit of work in flight and refuses more for now.
  public static let overloaded = Self("overloaded")
}

/// The HTTP answer for a `PipelineError`: its status, and a message safe to show a client.
///
/// Docs/Server.md has the table. Every code maps to a status; a code this table does not know (a
/// user stage's own) is a 500. An origin's own 404 or 410 (`httpStatus`) is a 404. The message names what went wrong in general terms and never the
/// error's own text, which can hold server paths, hosts or roots; that detail goes to the log.
///
/// ```swift
/// let answer = ErrorStatus(PipelineError(.notFound, "no such file: /srv/images/a.jpg"))
/// print(answer.status, answer.message)   // 404 the image was not found
/// ```
public struct ErrorStatus: Sendable, Equatable {
  /// The HTTP status code.
  public var status: Int
  /// A message for the response body, the same for every error of a code.
  public var message: String

  /// The answer for `error`.
  public init(_ error: PipelineError) {
    let code = error.code
    // An origin that says the image is not there (404, 410) is a missing source, not a failing one.
    if code == .httpStatus, let origin = error.httpStatus, origin == 404 || origin == 410 {
      (status, message) = Self.table[.notFound] ?? (404, "the image was not found")
      return
    }
    let (status, message) = Self.table[code] ?? (500, "the image could not be made")
    self.status = status
    self.message = message
  }

  /// Code → status and client message; Docs/Server.md shows it (a test keeps them equal).
  public static let table: [PipelineError.Code: (status: Int, message: String)] = [
    .invalidInput: (400, "the URL or an option is not valid"),
    .invalidDefinition: (400, "the URL or an option is not valid"),
    .unknownStage: (400, "the URL names an operation that does not exist"),
    .typeMismatch: (400, "the URL's operations do not fit together"),
    .badSignature: (403, "the URL's signature does not match"),
    .accessDenied: (403, "the image may not be read"),
    .forbiddenDestination: (403, "the image's source is not allowed"),
    .notFound: (404, "the image was not found"),
    .tooLarge: (413, "the image is larger than allowed"),
    .imageTooLarge: (413, "the image has more pixels than allowed"),
    .corruptImage: (422, "the image is damaged"),
    .unsupportedFormat: (415, "the image's format is not supported"),
    .overloaded: (429, "the server is busy; try again later"),
    .fetchFailed: (502, "the image's origin could not be reached"),
    .httpStatus: (502, "the image's origin answered with an error"),
    .tooManyRedirects: (502, "the image's origin redirected too often"),
    .timedOut: (504, "making the image took too long"),
    .cancelled: (499, "the request was cancelled"),
    .processingFailed: (500, "the image could not be made"),
    .encodeFailed: (500, "the image could not be encoded"),
    .writeFailed: (500, "the image could not be made"),
    .cacheFailed: (500, "the image could not be made"),
    .cacheCorrupt: (500, "the image could not be made"),
    .cacheUnavailable: (500, "the image could not be made"),
    .cacheInUse: (500, "the image could not be made"),
    .queueUnavailable: (503, "the server cannot reach its shared store; try again later"),
    .libraryUnavailable: (500, "the image could not be made"),
    .stageFailed: (500, "the image could not be made"),
    .willFinishFailed: (500, "the image could not be made"),
    .notifyFailed: (500, "the image could not be made"),
  ]
}
