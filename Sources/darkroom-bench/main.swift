import Darkroom
import Foundation

// Cache benchmarks (`make bench`): hit latency per store, through the executor, and what a table
// hit saves over decoding and resizing again. Usage: darkroom-bench PHOTO.jpg [ITERATIONS]
// Loader benchmarks: darkroom-bench loader URLS DUPLICATION on|off; darkroom-bench saturated DIR [HITS]

// Everything runs in a detached task: top-level code is on the main actor, and every call into a
// store would otherwise hop to the global executor and back, which is not what a server pays.
try await Task.detached {
  switch CommandLine.arguments.dropFirst().first {
  case "loader": try await loaderCoalescingBench(CommandLine.arguments)
  case "saturated": try await saturatedHitsBench(CommandLine.arguments)
  default: try await benchmark()
  }
}.value

func benchmark() async throws {
  let arguments = CommandLine.arguments
  guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: darkroom-bench PHOTO.jpg [ITERATIONS]\n".utf8))
    exit(64)
  }
  let photo = arguments[1]
  let iterations = arguments.count > 2 ? Int(arguments[2]) ?? 2000 : 2000
  let scratch = NSTemporaryDirectory() + "darkroom-bench-\(UUID().uuidString)"
  try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(atPath: scratch) }

  func micros(_ duration: Duration) -> String {
    String(format: "%.1f µs", Double(duration.components.attoseconds) / 1e12 + Double(duration.components.seconds) * 1e6)
  }

  func measure(_ count: Int, _ body: () async throws -> Void) async rethrows -> [Duration] {
    let clock = ContinuousClock()
    var samples: [Duration] = []
    samples.reserveCapacity(count)
    for _ in 0..<count {
      let start = clock.now
      try await body()
      samples.append(clock.now - start)
    }
    return samples
  }

  var rows: [(String, [Duration])] = []

  // A thumbnail pipeline whose last checkpoint answers every run after the first.
  func thumbnail(store: any CacheStore) -> Pipeline<ImageSource, EncodedImage> {
    Pipeline(name: "bench-\(store.name)") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 300, height: 300, mode: .fit)
      ImageEncoder(.jpeg(quality: 80))
      Cache<EncodedImage>(store: store, maxAge: .seconds(3600))
    }
  }

  let source = ImageSource(path: photo)
  let stores: [any CacheStore] = [
    MemoryStore(costLimit: 64 << 20), try DiskStore(directory: scratch + "/disk"),
  ]
  for store in stores {
    let pipeline = thumbnail(store: store)
    let first = try await pipeline.process(source)
    let key = CacheKey.make(
      prefix: "", source: CacheKey.identity(of: source) ?? "",
      upstream: pipeline.graph.runnableStages.dropLast().map(\.cacheIdentifier))
    guard try await store.entry(forKey: key) != nil else {
      FileHandle.standardError.write(Data("the \(store.name) store did not keep the value\n".utf8))
      exit(1)
    }
    rows.append(
      (
        "\(store.name) store lookup (\(first.bytes.count / 1024) KiB JPEG)",
        try await measure(iterations) { _ = try await store.entry(forKey: key) }
      ))
    rows.append(
      ("\(store.name) hit through the executor", try await measure(iterations) { _ = try await pipeline.process(source) }))
  }

  // The image table: decoded 300×300 pixels, handed to libvips in place.
  let format = try ImageTableFormat(name: "bench-300", width: 300, height: 300, layout: .rgb8, maxCount: 64)
  let tableStore = ImageTableStore(table: try ImageTable(directory: scratch + "/tables", format: format))
  let tablePipeline = Pipeline(name: "bench-table") {
    Fetcher()
    ImageDecoder()
    Resizer(width: 300, height: 300, mode: .fit)
    Cache<DecodedImage>(store: tableStore, maxAge: .seconds(3600))
  }
  _ = try await tablePipeline.process(source)
  let tableKey = CacheKey.make(
    prefix: "", source: CacheKey.identity(of: source) ?? "",
    upstream: tablePipeline.graph.runnableStages.dropLast().map(\.cacheIdentifier))
  guard try await tableStore.entry(forKey: tableKey) != nil else {
    FileHandle.standardError.write(Data("the table store did not keep the value\n".utf8))
    exit(1)
  }
  rows.append(
    (
      "table store lookup (300×300 RGB pixels)",
      try await measure(iterations) { _ = try await tableStore.entry(forKey: tableKey) }
    ))
  let tableHits = try await measure(iterations) { _ = try await tablePipeline.process(source) }
  rows.append(("table hit through the executor (decoded pixels)", tableHits))

  let decodeResize = try await measure(max(5, iterations / 100)) {
    let fetched = try await Fetcher().process(source, context: StageContext())
    let graph = try StageGraph(
      name: "decode-resize", stages: [AnyStage(ImageDecoder()), AnyStage(Resizer(width: 300, height: 300, mode: .fit))])
    let decoded = try await PipelineExecutor().start(graph, input: fetched, as: DecodedImage.self).value
    _ = try decoded.image.materialized()
  }
  rows.append(("decode + resize to 300×300 pixels (no cache)", decodeResize))

  let speedup = percentile(decodeResize, 0.5) / percentile(tableHits, 0.5)
  defer { print(String(format: "\nTable hit vs decode + resize again (p50): %.0fx faster (target >= 20x)", speedup)) }
  print("| measurement | p50 | p99 |")
  print("|---|---|---|")
  for (name, samples) in rows {
    print("| \(name) | \(micros(percentile(samples, 0.5))) | \(micros(percentile(samples, 0.99))) |")
  }
}
