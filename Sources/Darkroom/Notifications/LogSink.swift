import DarkroomCore
import Logging

/// Writes each notification to a swift-log `Logger`: `didFail` at `failureLevel`, the others at
/// `level`, with the payload as metadata (pipeline, operation, source, dimensions, format, bytes,
/// cache outcomes, error code and message).
///
/// ```swift
/// let sink = LogSink(logger: Logger(label: "images"), level: .info)
/// ```
public struct LogSink: NotificationSink {
  public let name = "log"
  public var logger: Logger
  public var level: Logger.Level
  public var failureLevel: Logger.Level

  public init(
    logger: Logger = Logger(label: "darkroom.notifications"), level: Logger.Level = .info, failureLevel: Logger.Level = .error
  ) {
    self.logger = logger
    self.level = level
    self.failureLevel = failureLevel
  }

  public func deliver(_ notification: LoadNotification) async throws {
    var metadata: Logger.Metadata = ["pipeline": "\(notification.pipeline)"]
    if let operation = notification.operationID { metadata["operation"] = "\(operation)" }
    if let source = notification.source { metadata["source"] = "\(source)" }
    if let image = notification.image {
      if let width = image.width, let height = image.height { metadata["size"] = "\(width)x\(height)" }
      if let format = image.format { metadata["format"] = "\(format)" }
      if let bytes = image.bytes { metadata["bytes"] = "\(bytes)" }
      if let path = image.path { metadata["path"] = "\(path)" }
    }
    if !notification.cache.isEmpty {
      metadata["cache"] = .array(notification.cache.map { "\($0.store):\($0.outcome.rawValue)" })
    }
    if let milliseconds = notification.milliseconds { metadata["ms"] = "\(Int(milliseconds.rounded()))" }
    if let error = notification.error {
      metadata["code"] = "\(error.code)"
      metadata["error"] = "\(error.message)"
    }
    let level = notification.name == LoadNotification.Name.didFail ? failureLevel : level
    logger.log(level: level, "\(notification.name)", metadata: metadata)
  }
}
