import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Image table store")
struct TableStoreTests {
  func stageKinds(_ observer: RecordingObserver) -> [String] {
    observer.events.compactMap { if case .stageStarted(let stage) = $0 { stage.kind } else { nil } }
  }

  /// Opens a table again once the previous opener has let it go: the first store is released
  /// when the operation's task has wound down, a moment after its value was delivered, and
  /// nothing signals that moment (a bounded retry, as in `ImageTableHardeningTests.reopen`).
  static func reopen(_ directory: String, _ format: ImageTableFormat) throws -> ImageTable {
    for attempt in 0... {
      do {
        return try ImageTable(directory: directory, format: format)
      } catch let error as PipelineError where error.code == .cacheInUse && attempt < 100 {
        usleep(10_000)
      }
    }
    throw PipelineError(.cacheUnavailable, "unreachable")
  }

  @Test("a table hit hands the stored pixels to the encoder: no fetch, no decode, no resize; it survives a restart")
  func pipelineHit() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-tables-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let images = try TestImages.encoded(.jpeg(quality: 95), width: 640, height: 480, quadrants: true)
    let path = try TestImages.write(images, named: "quadrants.jpg", in: directory)
    let format = try ImageTableFormat(name: "fit-160", width: 160, height: 160, layout: .rgb8, maxCount: 8)
    func pipeline(_ store: ImageTableStore) -> Pipeline<ImageSource, EncodedImage> {
      Pipeline(name: "table") {
        Fetcher()
        ImageDecoder()
        Resizer(width: 160, height: 160, mode: .fit)
        Cache<DecodedImage>(store: store, maxAge: .seconds(600))
        ImageEncoder(.png())
      }
    }
    let first: EncodedImage
    do {
      let store = ImageTableStore(table: try ImageTable(directory: directory + "/tables", format: format))
      first = try await pipeline(store).process(ImageSource(path: path))
      #expect(store.table.count == 1)
    }
    let store = ImageTableStore(table: try Self.reopen(directory + "/tables", format))
    let observer = RecordingObserver()
    let second = try await pipeline(store).run(ImageSource(path: path), options: RunOptions(observers: [observer])).value
    #expect(stageKinds(observer) == ["encode"])
    let decode = { (image: EncodedImage) in
      try ImageDecoder().decode(FetchedData(source: image.source, bytes: image.bytes)).image.pixelBytes()
    }
    #expect(try decode(second) == decode(first))
    #expect(second.width == 160 && second.height == 120)
    #expect(try await store.purge(source: ImageSource(path: path)) == 1)
    #expect(store.table.count == 0)
  }

  @Test("images that do not fit the table are reported as storeFailed, and the operation succeeds")
  func mismatch() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-tables-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try ImageTableFormat(name: "rgba-64", width: 64, height: 64, layout: .rgba8, maxCount: 4)
    let store = ImageTableStore(table: try ImageTable(directory: directory, format: format))
    let pipeline = Pipeline(name: "mismatch") {
      ImageDecoder()
      Resizer(width: 64, height: 64, mode: .fit)
      Cache<DecodedImage>(store: store)
      ImageEncoder(.png())
    }
    let observer = RecordingObserver()
    let input = try TestImages.fetched(.jpeg(), width: 128, height: 128)
    _ = try await pipeline.run(input, options: RunOptions(observers: [observer])).value
    let failed = observer.events.compactMap {
      if case .cache(let event) = $0, event.outcome == .storeFailed { event.detail ?? "" } else { nil }
    }
    #expect(failed.count == 1 && failed[0].contains("rgba8"))
  }

  @Test("the table store from JSON; a misplaced table cache is refused when the pipeline loads")
  func json() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-tables-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let context = StageBuildContext(cacheDirectory: directory)
    let graph = try PipelineDefinition.load(
      json: #"""
        {"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 50, "height": 50},
          {"stage": "cache", "store": "table", "width": 50, "height": 50, "maxCount": 10, "table": "json-50"}, {"stage": "encode", "format": "png"}]}
        """#, registry: Darkroom.standardRegistry, context: context)
    let path = try TestImages.write(try TestImages.encoded(.png(), width: 100, height: 100), named: "a.png", in: directory)
    _ = try await PipelineExecutor().start(graph, input: ImageSource(path: path), as: EncodedImage.self).value
    #expect(FileManager.default.fileExists(atPath: directory + "/.darkroom-cache/json-50.imagetable"))
    #expect {
      _ = try PipelineDefinition.load(
        json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "cache", "store": "table", "width": 5, "height": 5}]}"#,
        registry: Darkroom.standardRegistry, context: context)
    } throws: { error in
      (error as? PipelineError)?.message.contains("decoded images") == true
    }
    #expect {
      _ = try PipelineDefinition.load(
        json: #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "cache", "store": "table"}]}"#,
        registry: Darkroom.standardRegistry, context: context)
    } throws: { error in
      (error as? PipelineError)?.message.contains("width") == true
    }
  }
}
