import Foundation

/// A named announcement about a load, with its payload — like AsyncImageLoader's
/// `AsyncImageLoadDidFinish` / `AsyncImageLoadDidFail`.
///
/// The loader's ``Notifier`` posts ``Name/didFinish``, ``Name/didFail`` and ``Name/didCancel``
/// when operations end; a `notify` stage posts its own name when a run reaches it. The payload
/// says what was produced (dimensions, format, bytes), from which source, what the caches did
/// (store, key, outcome), how long it took, or the error.
///
/// ```swift
/// let notifier = Notifier(sinks: [JSONLinesSink.standardOutput])
/// notifier.post(LoadNotification(name: "avatarReady", pipeline: "avatar", source: url))
/// ```
public struct LoadNotification: Sendable, Hashable, Codable {
  /// Names the loader uses; a `notify` stage uses any other name it is given.
  public enum Name {
    public static let didFinish = "didFinish"
    public static let didFail = "didFail"
    public static let didCancel = "didCancel"
  }

  /// What was produced.
  public struct Image: Sendable, Hashable, Codable {
    public var width: Int?
    public var height: Int?
    public var format: String?
    public var bytes: Int?
    /// Where it was written, when it was.
    public var path: String?

    public init(width: Int? = nil, height: Int? = nil, format: String? = nil, bytes: Int? = nil, path: String? = nil) {
      self.width = width
      self.height = height
      self.format = format
      self.bytes = bytes
      self.path = path
    }

    public init(_ summary: OutputSummary) {
      self.init(width: summary.width, height: summary.height, format: summary.format, bytes: summary.bytes, path: summary.path)
    }
  }

  /// What went wrong.
  public struct Failure: Sendable, Hashable, Codable {
    public var code: String
    public var message: String
    public var stage: String?
    public var httpStatus: Int?

    public init(_ error: PipelineError) {
      code = error.code.rawValue
      message = error.message
      stage = error.stageKind
      httpStatus = error.httpStatus
    }
  }

  /// The notification's name (`didFinish`, or a `notify` stage's name).
  public var name: String
  /// The operation it is about.
  public var operationID: String?
  public var pipeline: String
  /// The source, with credentials redacted.
  public var source: String?
  public var image: Image?
  /// What the cache checkpoints did so far (store, key, outcome).
  public var cache: [CacheEvent]
  public var error: Failure?
  /// Time since the operation started.
  public var milliseconds: Double?
  public var date: Date

  public init(
    name: String, operationID: String? = nil, pipeline: String, source: String? = nil, image: Image? = nil,
    cache: [CacheEvent] = [], error: Failure? = nil, milliseconds: Double? = nil, date: Date = Date()
  ) {
    self.name = name
    self.operationID = operationID
    self.pipeline = pipeline
    self.source = source
    self.image = image
    self.cache = cache
    self.error = error
    self.milliseconds = milliseconds
    self.date = date
  }

  /// The notification as one line of JSON (keys sorted, dates in ISO 8601).
  public func jsonLine() throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    return try encoder.encode(self)
  }
}
