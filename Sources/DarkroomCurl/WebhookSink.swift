import DarkroomCore
import Foundation

/// Delivers each notification as an HTTP POST of its JSON to a URL, through libcurl: with a time
/// limit per attempt, retries with exponential backoff on connection failures, `5xx` and `429`
/// (honouring `Retry-After`), and the same SSRF guard as fetching (allow private hosts with
/// `allowHosts`).
///
/// A notification that still fails after its retries is counted as failed by the `Notifier`
/// (code `notifyFailed`); later ones are still sent.
///
/// ```swift
/// let webhook = WebhookSink(url: "https://hooks.example.com/darkroom", timeout: .seconds(5), retries: 3)
/// let notifier = Notifier(sinks: [webhook])
/// ```
public struct WebhookSink: NotificationSink {
  public let name = "webhook"
  /// Where notifications are posted.
  public let url: String
  private let transport: HTTPTransport

  /// A webhook posting to `url`; `options` sets the rest (headers such as an authorization
  /// token, allowed hosts).
  public init(url: String, timeout: Duration = .seconds(10), retries: Int = 3, options: HTTPOptions = HTTPOptions()) {
    self.url = url
    var options = options
    options.timeout = timeout
    options.connectTimeout = min(options.connectTimeout, timeout)
    options.retries = max(0, retries)
    options.maxBytes = min(options.maxBytes, 1 << 20)  // the answer is not used
    transport = HTTPTransport(options: options)
  }

  public func deliver(_ notification: LoadNotification) async throws {
    let body = String(decoding: try notification.jsonLine(), as: UTF8.self)
    do {
      _ = try await transport.post(url, body: body)
    } catch let error as PipelineError where error.code != .cancelled {
      throw PipelineError(
        .notifyFailed,
        "the webhook \(ImageSource(url)) did not take the notification \"\(notification.name)\": \(error.message)",
        cause: error)
    }
  }
}
