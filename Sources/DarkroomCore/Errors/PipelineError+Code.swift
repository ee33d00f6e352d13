extension PipelineError {
  /// A stable, machine-readable error code.
  ///
  /// Codes are strings so that events, logs and exit handling stay stable across releases and so
  /// that a user's own stages can add codes of their own:
  ///
  /// ```swift
  /// extension PipelineError.Code { static let quotaExceeded = Self("quotaExceeded") }
  /// ```
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A pipeline definition is malformed or an option is invalid.
    public static let invalidDefinition = Self("invalidDefinition")
    /// A definition names a stage kind that is not registered.
    public static let unknownStage = Self("unknownStage")
    /// Two neighbouring stages do not fit: the output of one is not the input of the next.
    public static let typeMismatch = Self("typeMismatch")
    /// An input given to a run is not usable (an unparsable source, an unsupported scheme).
    public static let invalidInput = Self("invalidInput")
    /// The source does not exist.
    public static let notFound = Self("notFound")
    /// The source may not be read: permissions, or a path outside the allowed root.
    public static let accessDenied = Self("accessDenied")
    /// Fetching the source failed for another reason.
    public static let fetchFailed = Self("fetchFailed")
    /// The server answered with an error status (kept in ``PipelineError/httpStatus``).
    public static let httpStatus = Self("httpStatus")
    /// The destination is not allowed: a non-public address (SSRF guard) or a forbidden scheme.
    public static let forbiddenDestination = Self("forbiddenDestination")
    /// A redirect chain was longer than `maxRedirects`, or looped.
    public static let tooManyRedirects = Self("tooManyRedirects")
    /// The source is bigger than the stage's `maxBytes`.
    public static let tooLarge = Self("tooLarge")
    /// The bytes are not an image of a trusted format.
    public static let unsupportedFormat = Self("unsupportedFormat")
    /// The image data is damaged or truncated.
    public static let corruptImage = Self("corruptImage")
    /// The image declares more pixels than the decoder's `maxPixels`.
    public static let imageTooLarge = Self("imageTooLarge")
    /// An image operation (crop, resize) could not be applied.
    public static let processingFailed = Self("processingFailed")
    /// Encoding the output failed.
    public static let encodeFailed = Self("encodeFailed")
    /// Writing the output failed.
    public static let writeFailed = Self("writeFailed")
    /// A cache could not be read or written.
    public static let cacheFailed = Self("cacheFailed")
    /// A cache entry failed its checksum or could not be read back; it is treated as a miss.
    public static let cacheCorrupt = Self("cacheCorrupt")
    /// A cache store cannot be opened or used (wrong format, damaged, read-only).
    public static let cacheUnavailable = Self("cacheUnavailable")
    /// A cache store is locked by another process (an image table another run has open); opening
    /// it again once that process has ended can succeed.
    public static let cacheInUse = Self("cacheInUse")
    /// A job queue's database cannot be reached or used (down, refused the login, its tables
    /// from a newer Darkroom); a worker reconnects with backoff.
    public static let queueUnavailable = Self("queueUnavailable")
    /// A shared library Darkroom opens on first use (libvips, libcurl) could not be loaded or
    /// started: the installation is at fault, not the input or the pipeline.
    public static let libraryUnavailable = Self("libraryUnavailable")
    /// The operation or a stage ran out of time.
    public static let timedOut = Self("timedOut")
    /// The operation was cancelled.
    public static let cancelled = Self("cancelled")
    /// A stage failed with an error that is not a `PipelineError` (a user stage's own error).
    public static let stageFailed = Self("stageFailed")
    /// A `willFinish` hook refused the result.
    public static let willFinishFailed = Self("willFinishFailed")
    /// A notification sink could not deliver (a webhook kept failing, a log file is not writable).
    public static let notifyFailed = Self("notifyFailed")
  }
}
