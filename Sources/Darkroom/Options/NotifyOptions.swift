import DarkroomCore
import DarkroomCurl
import Foundation
import Logging

/// JSON options of the `notify` stage: the notification's name and its sinks — JSON Lines
/// (`jsonl`: `"-"` for standard output or a file), a `webhook`, swift-log (`log`: a level),
/// swift-metrics (`metrics: true`). With `announce` (default true) the sinks also hear how every
/// operation of the pipeline ends (`didFinish`, `didFail`, `didCancel`).
///
/// ```json
/// {"stage": "notify", "name": "thumbnailReady", "jsonl": "-",
///  "webhook": {"url": "https://hooks.example.com/images", "timeout": 5, "retries": 3}}
/// ```
package struct NotifyOptions: StageOptions {
  public struct Webhook: Codable, Sendable {
    public var url: String
    public var timeout: Double?
    public var retries: Int?
    public var allowHosts: [String]?
    public var headers: [String: String]?
  }

  public var name: String
  public var jsonl: String?
  public var webhook: Webhook?
  public var log: String?
  public var metrics: Bool?
  public var announce: Bool

  public static let specs = [
    OptionSpec("name", .string, required: true, "The notification's name (for example thumbnailReady)."),
    OptionSpec("jsonl", .string, "Write notifications as JSON Lines: \"-\" for standard output, or a file path (appended)."),
    OptionSpec(
      "webhook",
      .object([
        OptionSpec("url", .string, required: true, "The http(s) URL to POST each notification's JSON to."),
        OptionSpec("timeout", .number(min: 0.001, max: 600), default: 10, "Seconds per attempt."),
        OptionSpec("retries", .integer(min: 0, max: 10), default: 3, "Retries on connection failures, 5xx and 429."),
        OptionSpec("allowHosts", .stringList, "Hosts allowed although they resolve to private addresses."),
        OptionSpec("headers", .stringMap, "Extra request headers (an authorization token, say)."),
      ]), "POST each notification to a URL."),
    OptionSpec(
      "log", .choice(Logger.Level.allCases.map(\.rawValue)),
      "Log each notification through swift-log at this level (failures at error)."),
    OptionSpec("metrics", .boolean, "Report counters and timers per stage, cache and failure code through swift-metrics."),
    OptionSpec("announce", .boolean, default: true, "Also announce how each operation ends: didFinish, didFail, didCancel."),
  ]

  public func problems() -> [OptionProblem] {
    var problems: [OptionProblem] = []
    if jsonl == nil && webhook == nil && log == nil && metrics != true {
      problems.append(OptionProblem("give at least one sink: jsonl, webhook, log or metrics"))
    }
    if let webhook {
      let source = ImageSource(webhook.url)
      if case .url(let url) = source.location, ["http", "https"].contains(url.scheme?.lowercased() ?? "") {
      } else {
        problems.append(OptionProblem(option: "webhook", "the webhook url must be an http(s) URL, got \"\(source)\""))
      }
    }
    if name.isEmpty { problems.append(OptionProblem(option: "name", "the notification needs a name")) }
    return problems
  }

  /// The sinks these options name, opened (files created) unless only validating, in a notifier
  /// kept in the context's `PipelineResources` (which the caller closes).
  func makeNotifier(in context: StageBuildContext) throws -> Notifier {
    var sinks: [any NotificationSink] = []
    if let jsonl, jsonl != "-", context.confinesFiles {
      throw PipelineError(
        .invalidDefinition,
        "a queued pipeline may not write notification files on the workers (jsonl \"\(jsonl.prefix(80))\"); use \"-\", a webhook or log"
      )
    }
    if let jsonl, !context.validatingOnly {
      sinks.append(try JSONLinesSink(path: jsonl))
    }
    if let webhook {
      var options = HTTPOptions()
      options.allowHosts = webhook.allowHosts ?? []
      options.headers = webhook.headers ?? [:]
      sinks.append(
        WebhookSink(
          url: webhook.url, timeout: .milliseconds(Int((webhook.timeout ?? 10) * 1000)), retries: webhook.retries ?? 3,
          options: options))
    }
    if let log, let level = Logger.Level(rawValue: log) { sinks.append(LogSink(level: level)) }
    if metrics == true { sinks.append(MetricsSink()) }
    let notifier = Notifier(sinks: sinks)
    context.resources.register(notifier)
    return notifier
  }
}
