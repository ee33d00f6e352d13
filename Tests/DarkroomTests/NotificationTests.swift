import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Logging
import MetricsTestKit
import Testing

@Suite("Notifications")
struct NotificationTests {
  let directory: String

  init() throws {
    directory = NSTemporaryDirectory() + "darkroom-notify-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  func photo(_ name: String = "photo.png") throws -> String {
    try TestImages.write(try TestImages.encoded(.png(), width: 200, height: 100), named: name, in: directory)
  }

  var thumbnail: Pipeline<ImageSource, EncodedImage> {
    Pipeline(name: "thumb") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 50)
      ImageEncoder(.webp(quality: 70))
    }
  }

  @Test("the loader's notifier announces finish and failure to observers, a stream and a JSON Lines file")
  func loaderEndsToSinks() async throws {
    let seen = Protected<[LoadNotification]>([])
    let stream = StreamSink()
    let jsonl = directory + "/events.jsonl"
    let notifier = Notifier(sinks: [
      ObserverSink { notification in seen.withLock { $0.append(notification) } }, stream, try JSONLinesSink(path: jsonl),
    ])
    var configuration = ImageLoader.Configuration()
    configuration.observers = [notifier]
    let loader = ImageLoader(configuration: configuration)
    let good = try photo()
    _ = try await loader.load(ImageSource(good), pipeline: thumbnail).value
    _ = await loader.load(ImageSource(directory + "/missing.png"), pipeline: thumbnail).result
    await notifier.close()

    let observed = seen.withLock { $0 }
    #expect(observed.map(\.name) == ["didFinish", "didFail"])
    let finished = try #require(observed.first)
    #expect(finished.image?.width == 50 && finished.image?.height == 25 && finished.image?.format == "webp")
    #expect((finished.image?.bytes ?? 0) > 0)
    #expect(finished.source == good && finished.pipeline == "thumb" && finished.milliseconds != nil)
    #expect(observed.last?.error?.code == "notFound" && observed.last?.error?.stage == "fetch")

    var streamed: [LoadNotification] = []
    for await notification in stream.notifications { streamed.append(notification) }
    #expect(streamed == observed)

    let lines = try String(contentsOfFile: jsonl, encoding: .utf8).split(separator: "\n")
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    let decoded = try lines.map { try decoder.decode(LoadNotification.self, from: Data($0.utf8)) }
    #expect(decoded.map(\.name) == ["didFinish", "didFail"])
    #expect(decoded.first?.image == finished.image && decoded.last?.error == observed.last?.error)
    #expect(notifier.statistics.allSatisfy { $0.statistics.delivered == 2 && $0.statistics.failed == 0 })
  }

  @Test("a notify stage in a JSON pipeline posts its name and the end, with cache outcomes")
  func notifyStageFromJSON() async throws {
    let jsonl = directory + "/notify.jsonl"
    let json = """
      {"version": 1, "name": "notified", "stages": [
        {"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40},
        {"stage": "encode", "format": "png"},
        {"stage": "cache", "store": "memory", "prefix": "notify-\(UUID().uuidString)"},
        {"stage": "notify", "name": "thumbnailReady", "jsonl": "\(jsonl)", "metrics": true}
      ]}
      """
    let resources = PipelineResources()
    let graph = try PipelineDefinition.load(
      json: json, registry: Darkroom.standardRegistry, context: StageBuildContext(resources: resources))
    let pipeline = try Pipeline<ImageSource, any Sendable>(graph)
    let source = ImageSource(try photo())
    _ = try await pipeline.process(source)
    _ = try await pipeline.process(source)  // a memory hit the second time
    await resources.flush()
    let names = try String(contentsOfFile: jsonl, encoding: .utf8).split(separator: "\n").map { line in
      try JSONDecoder.iso8601.decode(LoadNotification.self, from: Data(line.utf8))
    }
    #expect(names.map(\.name) == ["thumbnailReady", "didFinish", "thumbnailReady", "didFinish"])
    #expect(names[1].cache.map(\.outcome) == [.miss, .stored] && names[3].cache.map(\.outcome) == [.hit])
    #expect(names[0].image?.width == 40 && names[0].image?.format == "png")
    let keys = Set((names[1].cache + names[3].cache).compactMap(\.key))
    #expect(keys.count == 1 && names[3].cache.first?.store == "memory")  // one checkpoint, its key in each notification
  }

  @Test("metrics: timers and counters per stage, cache outcomes, operations and failures by code")
  func metrics() async throws {
    let metrics = TestMetrics()
    let sink = MetricsSink(factory: metrics)
    let notifier = Notifier(sinks: [sink])
    var configuration = ImageLoader.Configuration()
    configuration.observers = [notifier]
    let loader = ImageLoader(configuration: configuration)
    _ = try await loader.load(ImageSource(try photo()), pipeline: thumbnail.fusion(false)).value
    _ = await loader.load(ImageSource(directory + "/nothing.png"), pipeline: thumbnail).result
    await notifier.close()
    #expect(metrics.counterTotal(label: "darkroom_stages_total", dimensions: [("stage", "resize")]) == 1)
    #expect(try metrics.expectTimer("darkroom_stage_duration", [("stage", "decode")]).values.count == 1)
    #expect(metrics.counterTotal(label: "darkroom_operations_total", dimensions: [("outcome", "finished")]) == 1)
    #expect(metrics.counterTotal(label: "darkroom_operations_total", dimensions: [("outcome", "failed")]) == 1)
    #expect(metrics.counterTotal(label: "darkroom_failures_total", dimensions: [("code", "notFound"), ("stage", "fetch")]) == 1)
    #expect(metrics.counterTotal(label: "darkroom_notifications_total", dimensions: [("name", "didFail")]) == 1)
  }

  @Test("swift-log: each notification is a log line with its payload as metadata; failures at error level")
  func logging() async throws {
    let handler = CapturingLogHandler()
    let sink = LogSink(logger: Logger(label: "test") { _ in handler }, level: .notice)
    let notifier = Notifier(sinks: [sink])
    var configuration = ImageLoader.Configuration()
    configuration.observers = [notifier]
    let loader = ImageLoader(configuration: configuration)
    _ = try await loader.load(ImageSource(try photo()), pipeline: thumbnail).value
    _ = await loader.load(ImageSource(directory + "/gone.png"), pipeline: thumbnail).result
    await notifier.close()
    let records = handler.records
    #expect(records.map(\.message) == ["didFinish", "didFail"])
    #expect(records.map(\.level) == [.notice, .error])
    #expect(records.first?.metadata["size"] == "50x25" && records.first?.metadata["format"] == "webp")
    #expect(records.last?.metadata["code"] == "notFound")
  }

  @Test("notify options are validated: a sink is required, the webhook must be http(s)")
  func optionsValidated() throws {
    for (options, expected) in [
      (#"{"stage": "notify", "name": "x"}"#, "at least one sink"),
      (#"{"stage": "notify", "name": "x", "webhook": {"url": "ftp://h/x"}}"#, "http(s)"),
      (#"{"stage": "notify", "jsonl": "-"}"#, "name"),
    ] {
      let json = #"{"version": 1, "stages": [{"stage": "fetch"}, "# + options + "]}"
      let error = #expect(throws: PipelineError.self) {
        _ = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry)
      }
      #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }
  }
}

extension JSONDecoder {
  static var iso8601: JSONDecoder {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return decoder
  }
}

/// Keeps every log record, to check what a sink logged.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
  struct Record {
    var level: Logger.Level
    var message: String
    var metadata: Logger.Metadata
  }
  private let stored = Protected<[Record]>([])
  var metadata: Logger.Metadata = [:]
  var logLevel: Logger.Level = .trace
  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }
  var records: [Record] { stored.value }

  func log(event: LogEvent) {
    stored.withLock { $0.append(Record(level: event.level, message: "\(event.message)", metadata: event.metadata ?? [:])) }
  }
}

extension NotificationTests {
  @Test("a JSON Lines log that is a FIFO nobody reads, a folder or a device is refused at once, never waited on")
  func jsonLinesLogIsARegularFile() throws {
    let folder = NSTemporaryDirectory() + "darkroom-jsonl-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    #expect(mkfifo(folder + "/fifo", 0o644) == 0)
    for path in [folder + "/fifo", folder, "/dev/null"] {
      #expect(throws: PipelineError.self, "\(path)") { try JSONLinesSink(path: path) }
    }
    _ = try JSONLinesSink(path: folder + "/log.jsonl")
    #expect(FileManager.default.fileExists(atPath: folder + "/log.jsonl"))
  }
}
