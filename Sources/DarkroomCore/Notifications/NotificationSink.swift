import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Where notifications go: observers in the process, a stream, JSON Lines, a webhook, swift-log,
/// swift-metrics, or anything a user writes.
///
/// A ``Notifier`` calls ``deliver(_:)`` for one notification at a time per sink, in the order
/// posted, off the operation's path (a slow sink never slows a load). A sink that cannot deliver
/// throws; the notifier counts the failure and goes on.
///
/// ```swift
/// struct Printer: NotificationSink {
///   var name: String { "printer" }
///   func deliver(_ notification: LoadNotification) async throws { print(notification.name) }
/// }
/// ```
public protocol NotificationSink: Sendable {
  /// A short name for statistics and errors (`"webhook"`).
  var name: String { get }
  /// Delivers one notification.
  func deliver(_ notification: LoadNotification) async throws
  /// Called once no more notifications will come (flush buffers, close files).
  func close() async
}

extension NotificationSink {
  public func close() async {}
}

/// Calls a closure for each notification: in-process observers.
///
/// ```swift
/// let sink = ObserverSink { notification in metrics.record(notification) }
/// ```
public struct ObserverSink: NotificationSink {
  public let name = "observer"
  private let body: @Sendable (LoadNotification) async -> Void

  public init(_ body: @escaping @Sendable (LoadNotification) async -> Void) { self.body = body }

  public func deliver(_ notification: LoadNotification) async throws { await body(notification) }
}

/// Feeds notifications to an `AsyncStream` any task can read.
///
/// ```swift
/// let sink = StreamSink()
/// Task { for await notification in sink.notifications { print(notification.name) } }
/// ```
public final class StreamSink: NotificationSink {
  public let name = "stream"
  /// The notifications delivered, ending when the notifier closes.
  public let notifications: AsyncStream<LoadNotification>
  private let continuation: AsyncStream<LoadNotification>.Continuation

  /// A stream buffering at most `limit` undelivered notifications (the oldest are dropped).
  public init(bufferingNewest limit: Int = 10_000) {
    (notifications, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(limit))
  }

  public func deliver(_ notification: LoadNotification) async throws { continuation.yield(notification) }

  public func close() async { continuation.finish() }
}

/// Writes each notification as one line of JSON to standard output or a file (appended).
///
/// Lines are written by one thread of the sink's own, never on the cooperative pool, so a reader
/// that stops reading stalls only that thread (the ``Notifier`` counts what waits; a producer
/// bounds it with ``Notifier/waitUntilPending(below:)``). The first failed write (a closed pipe
/// under `| head`, a full disk) ends the output: that delivery and every later one fail with
/// `notifyFailed`, and nothing else is affected. `SIGPIPE` must be ignored by the process for a
/// closed pipe to be an error rather than a signal (the runner ignores it).
///
/// ```swift
/// let sink = try JSONLinesSink(path: "/var/log/darkroom/loads.jsonl")
/// ```
public final class JSONLinesSink: NotificationSink, @unchecked Sendable {
  public let name = "jsonl"
  private let handle: FileHandle
  private let closesHandle: Bool
  private let queue = DispatchQueue(label: "darkroom.jsonl-sink")
  private var failure: String?  // only touched on `queue`: why the output ended

  /// Standard output.
  public static var standardOutput: JSONLinesSink { JSONLinesSink(handle: .standardOutput, closesHandle: false) }

  /// Appends to the file at `path`, creating it; `"-"` is standard output.
  public convenience init(path: String) throws(PipelineError) {
    if path == "-" {
      self.init(handle: .standardOutput, closesHandle: false)
      return
    }
    // Appending to a regular file only: a FIFO nobody reads would block this open (and the
    // pipeline's loading) for ever, a device or a symlink is not a log.
    let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0o644)
    guard descriptor >= 0 else {
      let reason = String(cString: strerror(errno))
      throw PipelineError(
        .writeFailed, "cannot open the notification log \(path) for appending: \(reason); give a writable regular file")
    }
    var status = stat()
    guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      Glibc.close(descriptor)
      throw PipelineError(.writeFailed, "the notification log \(path) is not a regular file; give a file (or - for stdout)")
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    self.init(handle: FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), closesHandle: true)
  }

  init(handle: FileHandle, closesHandle: Bool) {
    self.handle = handle
    self.closesHandle = closesHandle
  }

  public func deliver(_ notification: LoadNotification) async throws {
    var text = try notification.jsonLine()
    text.append(0x0A)
    let line = text
    let descriptor = handle.fileDescriptor
    let result: String? = await withCheckedContinuation { continuation in
      queue.async { [self] in
        if let failure {
          continuation.resume(returning: failure)
          return
        }
        let reason = DescriptorIO.writeAll(descriptor, line).map { String(cString: strerror($0)) }
        if let reason { failure = reason }
        continuation.resume(returning: reason)
      }
    }
    if let result {
      throw PipelineError(.notifyFailed, "the JSON Lines output ended: \(result); later events are dropped")
    }
  }

  public func close() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      queue.async { [self] in
        if closesHandle { try? handle.close() }
        continuation.resume()
      }
    }
  }
}
