import Darkroom
import DarkroomTesting
import Foundation
import Testing

@Suite("Pipeline resources", .timeLimit(.minutes(3)))
struct PipelineResourcesTests {
  let directory: String

  init() throws {
    directory = NSTemporaryDirectory() + "darkroom-resources-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  /// A local file to fetch.
  func source(_ name: String, bytes: Int = 100) throws -> ImageSource {
    let path = directory + "/" + name
    try Data((0..<bytes).map { UInt8($0 % 251) }).write(to: URL(fileURLWithPath: path))
    return ImageSource(path: path)
  }

  /// Loads `stages` (after a fetch) from JSON with `resources` in the context.
  func load(_ stages: String, resources: PipelineResources) throws -> Pipeline<ImageSource, any Sendable> {
    let json = #"{"version": 1, "name": "resources", "stages": [{"stage": "fetch"}, "# + stages + "]}"
    let graph = try PipelineDefinition.load(
      json: json, registry: Darkroom.standardRegistry, context: StageBuildContext(resources: resources))
    return try Pipeline(graph)
  }

  func notify(to log: String) -> String { #"{"stage": "notify", "name": "ready", "jsonl": "\#(log)"}"# }

  /// The notifications written to a JSON Lines file.
  func notifications(in log: String) throws -> [LoadNotification] {
    try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map { line in
      try JSONDecoder.iso8601.decode(LoadNotification.self, from: Data(line.utf8))
    }
  }

  @Test("two loads with two resources objects keep their own notifiers: closing one leaves the other delivering")
  func separateNotifiers() async throws {
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let first = PipelineResources()
    let second = PipelineResources()
    let firstLog = directory + "/first.jsonl"
    let secondLog = directory + "/second.jsonl"
    let firstPipeline = try load(notify(to: firstLog), resources: first)
    let secondPipeline = try load(notify(to: secondLog), resources: second)
    let firstNotifier = try #require(first.notifiers.first)
    let secondNotifier = try #require(second.notifiers.first)
    #expect(first.notifiers.count == 1 && second.notifiers.count == 1)
    #expect(firstNotifier !== secondNotifier)

    let input = try source("a.bin")
    _ = try await firstPipeline.process(input)
    await second.close()
    #expect(second.notifiers.isEmpty && first.notifiers.count == 1)
    _ = try await firstPipeline.process(input)  // the first notifier still delivers
    _ = try await secondPipeline.process(input)  // the second one is closed: its posts are dropped
    await first.flush()
    #expect(try notifications(in: firstLog).map(\.name) == ["ready", "didFinish", "ready", "didFinish"])
    #expect(try notifications(in: secondLog).isEmpty)
    #expect(secondNotifier.statistics.allSatisfy { $0.statistics.posted == 0 })
    await first.close()
  }

  @Test("close() delivers what the notifiers still hold to a JSON Lines file before it returns")
  func closeDelivers() async throws {
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let resources = PipelineResources()
    let log = directory + "/closed.jsonl"
    let pipeline = try load(notify(to: log), resources: resources)
    let notifier = try #require(resources.notifiers.first)
    let runs = 25
    for index in 0..<runs { _ = try await pipeline.process(try source("\(index).bin")) }
    await resources.close()  // no flush before: what is queued is delivered by close
    let written = try notifications(in: log)
    #expect(written.count == 2 * runs)
    #expect(written.filter { $0.name == "ready" }.count == runs && written.filter { $0.name == "didFinish" }.count == runs)
    #expect(notifier.statistics.allSatisfy { $0.statistics.posted == 2 * runs && $0.statistics.delivered == 2 * runs })
    #expect(resources.notifiers.isEmpty)
  }

  @Test("purge over a resources object removes a source's entries from the disk store its definition named")
  func purgeDiskStore() async throws {
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let resources = PipelineResources()
    let cache = #"{"stage": "cache", "store": "disk", "directory": "\#(directory)/disk", "maxAge": 60}"#
    let pipeline = try load(cache, resources: resources)
    let disk = try #require(resources.stores.first as? DiskStore)
    #expect(resources.stores.count == 1)
    let keep = try source("keep.bin")
    let drop = try source("drop.bin", bytes: 200)
    for input in [keep, drop] { _ = try await pipeline.process(input) }
    #expect(try await disk.statistics().entries == 2)

    #expect(try await PipelineResources().purge(source: drop).isEmpty)  // holds no store
    #expect(try await resources.purge(source: drop) == ["disk": 1])
    #expect(try await disk.statistics().entries == 1)
    #expect(try await resources.purge(source: keep) == ["disk": 1])
    #expect(try await disk.statistics().entries == 0)
    await resources.close()
    #expect(resources.stores.isEmpty)
  }

  @Test("close() closes every registered store once, then forgets them")
  func closeClosesStores() async throws {
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let resources = PipelineResources()
    let stores = [ClosingStore(), ClosingStore()]
    resources.register(stores[0], id: "a")
    resources.register(stores[1], id: "b")
    resources.register(stores[1], id: "b")  // the same id is kept once
    await resources.close()
    #expect(stores.map(\.closes) == [1, 1])
    #expect(resources.stores.isEmpty)
    await resources.close()
    #expect(stores.map(\.closes) == [1, 1])
  }
}

/// A store that holds nothing and counts how often it was closed.
private final class ClosingStore: CacheStore {
  private let count = Protected(0)
  var closes: Int { count.value }
  let name = "closing"
  func entry(forKey key: String) async throws -> CacheEntry? { nil }
  func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {}
  func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {}
  func removeEntry(forKey key: String) async throws {}
  func removeAll() async throws {}
  func purge(source: ImageSource) async throws -> Int { 0 }
  func statistics() async throws -> CacheStatistics {
    CacheStatistics(store: name, entries: 0, bytes: 0, byteLimit: nil, countLimit: nil, location: nil)
  }
  func close() async { count.withLock { $0 += 1 } }
}
