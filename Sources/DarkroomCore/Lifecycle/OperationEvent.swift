import Foundation

/// The identity of one run of a pipeline.
///
/// ```swift
/// let operation = loader.load(ImageSource("a.jpg"), pipeline: thumbnail)
/// print(operation.id)   // a lower-case UUID
/// loader.setPriority(.high, for: operation.id)
/// ```
public struct OperationID: Sendable, Hashable, Codable, CustomStringConvertible {
  public let uuid: UUID
  /// A new, random identity (a version 4 UUID).
  public init() { uuid = .randomVersion4() }
  /// The identity `uuid`.
  public init(_ uuid: UUID) { self.uuid = uuid }
  public var description: String { uuid.uuidString.lowercased() }
}

extension UUID {
  /// A version 4 UUID from the system's random source (`getrandom`). Foundation's `UUID()` opens
  /// and reads `/dev/urandom` each time on Linux, and every run of a pipeline makes one.
  static func randomVersion4() -> UUID {
    var random = SystemRandomNumberGenerator()
    var bytes = (random.next() as UInt64, random.next() as UInt64)
    return withUnsafeMutableBytes(of: &bytes) { raw in
      raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
      raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
      return UUID(
        uuid: (
          raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
          raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]
        ))
    }
  }
}

/// Where an operation is in its lifecycle.
///
/// ```swift
/// let operation = pipeline.run(source)
/// operation.status              // .pending or .running
/// _ = await operation.result
/// operation.status.isTerminal   // true: .finished, .failed or .cancelled
/// ```
public enum OperationStatus: String, Sendable, Hashable, Codable, CaseIterable {
  /// Created, not started yet.
  case pending
  /// Running its stages.
  case running
  /// All stages done; the `willFinish` observers and hooks are running.
  case finishing
  /// Finished with a result.
  case finished
  /// Failed with a ``PipelineError``.
  case failed
  /// Cancelled before it could finish.
  case cancelled

  /// True for `finished`, `failed` and `cancelled`: nothing changes afterwards.
  public var isTerminal: Bool { self == .finished || self == .failed || self == .cancelled }
}

/// Something that happened to an operation, in the order it happened.
///
/// Every operation emits `started`, then `stageStarted`/`stageFinished` pairs, then `willFinish`
/// when all stages are done, then exactly one of `finished`, `failed` or `cancelled`.
///
/// ```swift
/// for await event in pipeline.run(source).events {
///   if case .stageFinished(let stage, let duration) = event { print(stage.kind, duration) }
/// }
/// ```
public enum OperationEvent: Sendable, CustomStringConvertible {
  case started
  case stageStarted(StageInfo)
  case stageFinished(StageInfo, duration: Duration)
  /// A stage's remark (a fallback taken, a partial decode accepted…).
  case note(String)
  /// Bytes received so far by a transfer, and the total when the server said it (rate-limited).
  case progress(received: Int, expected: Int?)
  /// A cache checkpoint was looked up or stored.
  case cache(CacheEvent)
  case willFinish
  case finished(OutputSummary)
  case failed(PipelineError)
  case cancelled

  /// The stable event name used in JSON Lines output.
  public var name: String {
    switch self {
    case .started: "started"
    case .stageStarted: "stageStarted"
    case .stageFinished: "stageFinished"
    case .note: "note"
    case .progress: "progress"
    case .cache: "cache"
    case .willFinish: "willFinish"
    case .finished: "finished"
    case .failed: "failed"
    case .cancelled: "cancelled"
    }
  }

  /// True for the three events that end an operation.
  public var isTerminal: Bool {
    switch self {
    case .finished, .failed, .cancelled: true
    default: false
    }
  }

  public var description: String {
    switch self {
    case .stageStarted(let stage): "stageStarted(\(stage.kind))"
    case .stageFinished(let stage, let duration): "stageFinished(\(stage.kind), \(duration))"
    case .note(let text): "note(\(text))"
    case .failed(let error): "failed(\(error.code))"
    default: name
    }
  }
}

/// What observers learn about the operation an event belongs to.
///
/// ```swift
/// struct StartLogger: OperationObserver {
///   func operationDidStart(_ operation: OperationInfo) {
///     print(operation.id, operation.pipelineName, operation.source ?? "-")
///   }
/// }
/// ```
public struct OperationInfo: Sendable, Hashable {
  public var id: OperationID
  public var pipelineName: String
  /// The source description, when the input was an ``ImageSource``.
  public var source: String?

  public init(id: OperationID, pipelineName: String, source: String?) {
    self.id = id
    self.pipelineName = pipelineName
    self.source = source
  }
}

/// What happened at a cache checkpoint.
///
/// ```swift
/// let event = CacheEvent(.hit, store: "memory", stageIndex: 2)
/// event.description   // "cache hit: memory at stages[2]"
/// ```
public struct CacheEvent: Sendable, Hashable, Codable, CustomStringConvertible {
  public enum Outcome: String, Sendable, Hashable, Codable {
    /// The store had the value: the run resumed after this checkpoint.
    case hit
    /// The store did not have it (or it had expired; `detail` says `stale` or `changed`).
    case miss
    /// A stale value was revalidated with a conditional request (`304 Not Modified`) and reused.
    case revalidated
    /// The value was stored when the operation finished.
    case stored
    /// Storing failed; the operation still succeeds.
    case storeFailed
  }

  public var outcome: Outcome
  /// The store's name (`"memory"`).
  public var store: String
  /// The checkpoint's position in the pipeline as it runs.
  public var stageIndex: Int
  /// Why a store failed, or why an entry missed.
  public var detail: String?
  /// The checkpoint's cache key (prefix, source identity and upstream stages, hashed).
  public var key: String?

  public init(_ outcome: Outcome, store: String, stageIndex: Int, key: String? = nil, detail: String? = nil) {
    self.outcome = outcome
    self.store = store
    self.stageIndex = stageIndex
    self.key = key
    self.detail = detail
  }

  public var description: String {
    "cache \(outcome.rawValue): \(store) at stages[\(stageIndex)]" + (detail.map { ": \($0)" } ?? "")
  }
}
