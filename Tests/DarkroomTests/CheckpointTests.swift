import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Cache checkpoints")
struct CheckpointTests {
  func stageKinds(_ observer: RecordingObserver) -> [String] {
    observer.events.compactMap { if case .stageStarted(let stage) = $0 { stage.kind } else { nil } }
  }

  func cacheEvents(_ observer: RecordingObserver) -> [String] {
    observer.events.compactMap { if case .cache(let event) = $0 { event.description } else { nil } }
  }

  func temporaryImage() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-cache-\(UUID().uuidString).jpg"
    try TestImages.encoded(.jpeg(), width: 400, height: 300).data.write(to: URL(fileURLWithPath: path))
    return path
  }

  @Test("a second run is answered by the last checkpoint without running a stage")
  func hitSkipsEverything() async throws {
    let store = MemoryStore(costLimit: 10 << 20)
    let pipeline = Pipeline(name: "thumb") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 100)
      ImageEncoder(.png())
      Cache<EncodedImage>(store: store, maxAge: .seconds(60))
    }
    let path = try temporaryImage()
    defer { try? FileManager.default.removeItem(atPath: path) }
    let first = RecordingObserver()
    let a = try await pipeline.run(ImageSource(path: path), options: RunOptions(observers: [first])).value
    #expect(stageKinds(first) == ["fetch", "decode+resize", "encode", "cache"])
    #expect(cacheEvents(first) == ["cache miss: memory at stages[3]", "cache stored: memory at stages[3]"])
    let second = RecordingObserver()
    let b = try await pipeline.run(ImageSource(path: path), options: RunOptions(observers: [second])).value
    #expect(stageKinds(second).isEmpty)
    #expect(cacheEvents(second) == ["cache hit: memory at stages[3]"])
    #expect(a.bytes == b.bytes)
    #expect(second.names.last == "finished")
  }

  @Test("a run resumes after the latest checkpoint that has the value")
  func resumeInTheMiddle() async throws {
    let store = MemoryStore(costLimit: 10 << 20)
    let path = try temporaryImage()
    defer { try? FileManager.default.removeItem(atPath: path) }
    func pipeline(width: Int) -> Pipeline<ImageSource, EncodedImage> {
      Pipeline(name: "resume") {
        Fetcher()
        Cache<FetchedData>(store: store, maxAge: .seconds(60))
        ImageDecoder()
        Resizer(width: width)
        ImageEncoder(.png())
      }
    }
    _ = try await pipeline(width: 100).process(ImageSource(path: path))
    // Another width downstream: the fetched bytes come from the checkpoint, the rest runs.
    let observer = RecordingObserver()
    let image = try await pipeline(width: 50).run(ImageSource(path: path), options: RunOptions(observers: [observer])).value
    #expect(image.width == 50)
    #expect(stageKinds(observer) == ["decode+resize", "encode"])
    // A different upstream configuration never reads the stored value.
    let other = Pipeline(name: "other") {
      Fetcher(maxBytes: 1_000_000)
      Cache<FetchedData>(store: store, maxAge: .seconds(60))
    }
    let otherObserver = RecordingObserver()
    _ = try await other.run(ImageSource(path: path), options: RunOptions(observers: [otherObserver])).value
    #expect(stageKinds(otherObserver) == ["fetch", "cache"])
  }

  @Test(
    "a local file's entries follow the file: edited in place or replaced is a new key, gone is no cached value, and one file named from two folders is one entry"
  )
  func fileIdentity() async throws {
    let store = MemoryStore(costLimit: 10 << 20)
    let pipeline = Pipeline(name: "identity") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 40)
      ImageEncoder(.png())
      Cache<EncodedImage>(store: store, maxAge: .seconds(3600))
    }
    let folder = NSTemporaryDirectory() + "darkroom-identity-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder + "/sub", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let path = folder + "/a.png"
    try TestImages.encoded(.png(), width: 80, height: 40).data.write(to: URL(fileURLWithPath: path))
    let first = try await pipeline.process(ImageSource(path: path))
    #expect(first.height == 20)
    // The same file through another spelling of its path (with ..) is the same entry.
    let observer = RecordingObserver()
    _ = try await pipeline.run(ImageSource(path: folder + "/sub/../a.png"), options: RunOptions(observers: [observer])).value
    #expect(cacheEvents(observer) == ["cache hit: memory at stages[3]"])
    // Edited in place (the same name and inode): a new key, a new output.
    try TestImages.encoded(.png(), width: 40, height: 80).data.write(to: URL(fileURLWithPath: path))
    let edited = try await pipeline.process(ImageSource(path: path))
    #expect(edited.height == 80, "the edited file's output, not the cached one")
    // `link/..` is the parent of the link's target, not the folder holding the link: a path
    // through it names another file, which gets its own entry (a textual `..` would share one).
    try FileManager.default.createDirectory(atPath: folder + "/elsewhere/deep", withIntermediateDirectories: true)
    try TestImages.encoded(.png(), width: 60, height: 60).data.write(to: URL(fileURLWithPath: folder + "/elsewhere/a.png"))
    try FileManager.default.createSymbolicLink(atPath: folder + "/link", withDestinationPath: folder + "/elsewhere/deep")
    let throughLink = try await pipeline.process(ImageSource(path: folder + "/link/../a.png"))
    #expect(throughLink.height == 40, "elsewhere/a.png (60×60 → 40×40), not a.png (40×80)")
    let loader = ImageLoader(configuration: ImageLoader.Configuration())
    let uncached = Pipeline(name: "in-flight") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 40)
      ImageEncoder(.png())
    }
    async let direct = loader.load(ImageSource(path: path), pipeline: uncached).value
    async let linked = loader.load(ImageSource(path: folder + "/link/../a.png"), pipeline: uncached).value
    let (one, two) = try await (direct, linked)
    #expect(one.height == 80 && two.height == 40, "in flight, too")
    // Gone: the cached output is not served for a file that is not there.
    try FileManager.default.removeItem(atPath: path)
    await #expect(throws: PipelineError.self) { try await pipeline.process(ImageSource(path: path)) }
  }

  @Test("maxAge below zero never keeps the value in memory; prefixes separate variants")
  func maxAgeAndPrefix() async throws {
    let store = MemoryStore(costLimit: 10 << 20)
    let path = try temporaryImage()
    defer { try? FileManager.default.removeItem(atPath: path) }
    let never = Pipeline(name: "never") {
      Fetcher()
      Cache<FetchedData>(store: store, maxAge: .seconds(-1))
    }
    _ = try await never.process(ImageSource(path: path))
    #expect(store.cache.count == 0)
    let a = Pipeline(name: "a") {
      Fetcher()
      Cache<FetchedData>(store: store, maxAge: .seconds(60), prefix: "a")
    }
    let b = Pipeline(name: "b") {
      Fetcher()
      Cache<FetchedData>(store: store, maxAge: .seconds(60), prefix: "b")
    }
    _ = try await a.process(ImageSource(path: path))
    _ = try await b.process(ImageSource(path: path))
    #expect(store.cache.count == 2)
  }

  @Test("purge by source removes every variant of that source and nothing else")
  func purgeBySource() async throws {
    let store = MemoryStore(costLimit: 10 << 20)
    let first = try temporaryImage()
    let second = try temporaryImage()
    defer {
      try? FileManager.default.removeItem(atPath: first)
      try? FileManager.default.removeItem(atPath: second)
    }
    for width in [32, 64] {
      let pipeline = Pipeline(name: "variant") {
        Fetcher()
        Cache<FetchedData>(store: store, maxAge: .seconds(60))
        ImageDecoder()
        Resizer(width: width)
        ImageEncoder(.png())
        Cache<EncodedImage>(store: store, maxAge: .seconds(60), prefix: "w\(width)")
      }
      _ = try await pipeline.process(ImageSource(path: first))
      _ = try await pipeline.process(ImageSource(path: second))
    }
    #expect(store.cache.count == 6)  // per source: the bytes, and two sizes
    _ = try await store.purge(source: ImageSource(path: first))
    #expect(store.cache.count == 3)
    _ = try await store.purge(source: ImageSource("file://" + second))  // same file, as a URL
    #expect(store.cache.count == 0)
  }

  @Test("the cache kind works from JSON, anywhere in the pipeline")
  func fromJSON() async throws {
    let graph = try PipelineDefinition.load(
      json: #"""
        {"version": 1, "stages": [{"stage": "fetch"}, {"stage": "cache", "maxAge": 60, "prefix": "json"}, {"stage": "decode"},
          {"stage": "resize", "width": 64}, {"stage": "encode", "format": "webp"}, {"stage": "cache", "maxAge": 60, "prefix": "json"}]}
        """#, registry: Darkroom.standardRegistry)
    let path = try temporaryImage()
    defer { try? FileManager.default.removeItem(atPath: path) }
    let first = try await PipelineExecutor().start(graph, input: ImageSource(path: path), as: EncodedImage.self).value
    let observer = RecordingObserver()
    let second = try await PipelineExecutor().start(
      graph, input: ImageSource(path: path), options: RunOptions(observers: [observer]), as: EncodedImage.self
    ).value
    #expect(first.bytes == second.bytes && second.format == .webp)
    #expect(stageKinds(observer).isEmpty)
  }
}

/// A store whose every entry says it expires at the far end of `Date` (a tampered file's value).
private struct FarFutureStore: CacheStore {
  let name = "far-future"
  let value: EncodedImage
  func entry(forKey key: String) async throws -> CacheEntry? {
    CacheEntry(value: value, expiresAt: Date(timeIntervalSince1970: .greatestFiniteMagnitude))
  }
  func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {}
  func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {}
  func removeEntry(forKey key: String) async throws {}
  func removeAll() async throws {}
  func purge(source: ImageSource) async throws -> Int { 0 }
  func statistics() async throws -> CacheStatistics { CacheStatistics(store: name, entries: 0, bytes: 0) }
}

extension CheckpointTests {
  @Test("an entry whose expiry is the far end of Date (a number from a file) is served without a trap")
  func farFutureExpiry() async throws {
    let path = try temporaryImage()
    defer { try? FileManager.default.removeItem(atPath: path) }
    let image = try TestImages.encoded(.png(), width: 8, height: 8)
    let store = FarFutureStore(value: EncodedImage(source: ImageSource("x"), bytes: image, format: .png, width: 8, height: 8))
    let pipeline = Pipeline(name: "far") {
      Fetcher()
      ImageDecoder()
      ImageEncoder(.png())
      Cache<EncodedImage>(store: store)
    }
    let output = try await pipeline.process(ImageSource(path: path))
    #expect(output.width == 8 && output.bytes == image)
    #expect(output.source == ImageSource(path: path), "the hit carries the run's own source")
  }
}

extension CheckpointTests {
  @Test(
    "a memory store counts a decoded image by its pixels and the source it keeps (it counted 1 KiB), so its byte limit bounds decoded images too"
  )
  func decodedImagesCostTheirPixels() async throws {
    let path = NSTemporaryDirectory() + "darkroom-cost-\(UUID().uuidString).png"
    try TestImages.encoded(.png(), width: 400, height: 300).data.write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let store = MemoryStore(costLimit: 64 << 20)
    let pipeline = Pipeline(name: "decoded") {
      Fetcher()
      ImageDecoder()
      Cache<DecodedImage>(store: store, maxAge: .seconds(60))
    }
    _ = try await pipeline.process(ImageSource(path: path))
    let stats = try await store.statistics()
    #expect(stats.entries == 1, "\(stats)")
    // The pixels, and the compressed file the lazily decoded image keeps alive.
    let fileBytes = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    #expect(stats.bytes == 400 * 300 * 3 + fileBytes, "\(stats)")
  }
}
