import Foundation

/// A named announcement about a load, with its payload — like AsyncImageLoader's
/// `AsyncImageLoadDidFinish` / `AsyncImageLoadDidFail`.
///
/// The loader's ``Notifier`` posts ``Name/didFinish``, ``Name/didFail`` and ``Name/didCancel``
/// when operations end; a `notify` stage posts its own name when a run reaches it; a notifier made
/// with `events: true` posts every operation event under the event's name (`stageStarted`…), which
/// is how `darkroom run --events jsonl` writes its lines. The payload says what was produced
/// (dimensions, format, bytes), from which source, what the caches did, how long it took, or the
/// error.
///
/// Its JSON form (``jsonLine()``, `Codable`) is flat, one object per line, as documented in
/// Lifecycle.md: `{"event": "didFinish", "operation": "…", "pipeline": "…", "width": 300, …}`.
/// Dates are ISO 8601 to the second; a stage's `identifier` is not part of it.
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
  public struct Image: Sendable, Hashable {
    public var width: Int?
    public var height: Int?
    public var format: String?
    public var bytes: Int?
    /// Where it was written, when it was.
    public var path: String?
    /// True when a lenient decoder accepted a damaged image.
    public var partial: Bool

    public init(
      width: Int? = nil, height: Int? = nil, format: String? = nil, bytes: Int? = nil, path: String? = nil, partial: Bool = false
    ) {
      self.width = width
      self.height = height
      self.format = format
      self.bytes = bytes
      self.path = path
      self.partial = partial
    }

    public init(_ summary: OutputSummary) {
      self.init(
        width: summary.width, height: summary.height, format: summary.format, bytes: summary.bytes, path: summary.path,
        partial: summary.partial)
    }
  }

  /// What went wrong.
  public struct Failure: Sendable, Hashable, Codable {
    public var code: String
    public var message: String
    public var stage: String?
    public var httpStatus: Int?
    /// The underlying library's or system's message, when there was one.
    public var cause: String?

    public init(_ error: PipelineError) {
      code = error.code.rawValue
      message = error.message
      stage = error.stageKind
      httpStatus = error.httpStatus
      cause = error.cause.map { String(describing: $0) }
    }
  }

  /// The notification's name (`didFinish`, a `notify` stage's name, or an event name).
  public var name: String
  /// The operation it is about.
  public var operationID: String?
  public var pipeline: String
  /// The source, with credentials redacted.
  public var source: String?
  public var image: Image?
  /// What the cache checkpoints did (so far, or the one cache event of a `cache` line).
  public var cache: [CacheEvent]
  public var error: Failure?
  /// Time since the operation started.
  public var milliseconds: Double?
  /// The stage of a `stageStarted` / `stageFinished` event.
  public var stage: StageInfo?
  /// How long the stage took (`stageFinished`).
  public var stageMilliseconds: Double?
  /// A stage's remark (`note` events).
  public var note: String?
  /// Transfer progress (`progress` events).
  public var received: Int?
  public var expected: Int?
  public var date: Date

  public init(
    name: String, operationID: String? = nil, pipeline: String, source: String? = nil, image: Image? = nil,
    cache: [CacheEvent] = [], error: Failure? = nil, milliseconds: Double? = nil, stage: StageInfo? = nil,
    stageMilliseconds: Double? = nil, note: String? = nil, received: Int? = nil, expected: Int? = nil, date: Date = Date()
  ) {
    self.name = name
    self.operationID = operationID
    self.pipeline = pipeline
    self.source = source
    self.image = image
    self.cache = cache
    self.error = error
    self.milliseconds = milliseconds
    self.stage = stage
    self.stageMilliseconds = stageMilliseconds
    self.note = note
    self.received = received
    self.expected = expected
    self.date = date
  }

  /// One operation event as a notification named after the event.
  public init(event: OperationEvent, operation: OperationInfo, milliseconds: Double? = nil) {
    self.init(
      name: event.name, operationID: operation.id.description, pipeline: operation.pipelineName, source: operation.source,
      milliseconds: milliseconds)
    switch event {
    case .stageStarted(let info):
      stage = info
    case .stageFinished(let info, let duration):
      stage = info
      stageMilliseconds = LoadNotification.milliseconds(duration)
    case .note(let text):
      note = text
    case .progress(let received, let expected):
      self.received = received
      self.expected = expected
    case .cache(let event):
      cache = [event]
    case .finished(let summary):
      image = Image(summary)
    case .failed(let failure):
      error = Failure(failure)
    case .started, .willFinish, .cancelled:
      break
    }
  }

  static func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
  }
}
