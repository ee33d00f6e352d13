import Darkroom
import Foundation
import Synchronization

/// Counts the stage runs that did work (not joined), by stage kind.
final class WorkCounter: OperationObserver, Sendable {
  private let counts = Protected<[String: Int]>([:])
  func receive(_ event: OperationEvent, for operation: OperationInfo) {
    guard case .stageStarted(let stage) = event, !stage.joined else { return }
    counts.withLock { counts in
      for kind in [stage.kind] + stage.fusedKinds { counts[kind, default: 0] += 1 }
    }
  }
  func count(_ kind: String) -> Int { counts.withLock { $0[kind] ?? 0 } }
}

func percentile(_ samples: [Duration], _ fraction: Double) -> Duration {
  let sorted = samples.sorted()
  return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
}

func milliseconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func localFetcher() -> Fetcher {
  var http = HTTPOptions()
  http.allowHosts = ["127.0.0.1"]
  return Fetcher(transports: [FileTransport(), HTTPTransport(options: http)])
}

/// `darkroom-bench loader URLS DUPLICATION on|off`: every URL of the file asked DUPLICATION times,
/// interleaved, all at once through one loader (thumbnail pipeline); prints one JSON line.
func loaderCoalescingBench(_ arguments: [String]) async throws {
  guard arguments.count >= 5, let duplication = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: darkroom-bench loader URLS DUPLICATION on|off\n".utf8))
    exit(64)
  }
  let urls = try String(contentsOfFile: arguments[2], encoding: .utf8).split(separator: "\n").map(String.init)
  let counter = WorkCounter()
  var configuration = ImageLoader.Configuration()
  configuration.coalescing = arguments[4] == "on"
  configuration.observers = [counter]
  let loader = ImageLoader(configuration: configuration)
  let fetch = localFetcher()
  let thumbnail = Pipeline(name: "loader-bench") {
    fetch
    ImageDecoder()
    Resizer(width: 300, height: 300, mode: .fit)
    ImageEncoder(.jpeg(quality: 80))
  }
  let clock = ContinuousClock()
  let started = clock.now
  var operations: [PipelineOperation<EncodedImage>] = []
  // Interleaved: the copies of one URL arrive spread over the batch, as duplicate requests do.
  for _ in 0..<duplication {
    for url in urls { operations.append(loader.load(ImageSource(url), pipeline: thumbnail)) }
  }
  var failed = 0
  for operation in operations {
    if case .failure = await operation.result { failed += 1 }
  }
  let elapsed = milliseconds(clock.now - started) / 1000
  print(
    #"{"loads": \#(operations.count), "seconds": \#(elapsed), "transfers": \#(counter.count("fetch")), "decodes": \#(counter.count("decode")), "failed": \#(failed)}"#
  )
}

/// `darkroom-bench saturated PHOTOS_DIR [HITS]`: the CPU class kept saturated with full-size
/// decodes of the photos while a cached thumbnail is loaded again and again; prints p50/p99.
func saturatedHitsBench(_ arguments: [String]) async throws {
  guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: darkroom-bench saturated PHOTOS_DIR [HITS]\n".utf8))
    exit(64)
  }
  let folder = arguments[2]
  let hits = arguments.count > 3 ? Int(arguments[3]) ?? 500 : 500
  let photos = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".jpg") }.sorted()
    .map { (folder as NSString).appendingPathComponent($0) }
  guard let first = photos.first else { throw PipelineError(.notFound, "no .jpg photos in \(folder)") }
  let loader = ImageLoader()
  let store = MemoryStore(costLimit: 64 << 20)
  let fetch = localFetcher()
  let cached = Pipeline(name: "cached") {
    fetch
    ImageDecoder()
    Resizer(width: 300, height: 300, mode: .fit)
    ImageEncoder(.jpeg(quality: 80))
    Cache<EncodedImage>(store: store, maxAge: .seconds(3600))
  }
  // Full decodes, no shrink-on-load, a sharpen-free resize: the expensive work.
  let heavy = Pipeline(name: "heavy", fusion: false) {
    fetch
    ImageDecoder()
    Resizer(width: 1600)
    ImageEncoder(.jpeg(quality: 90))
  }
  _ = try await loader.load(ImageSource(first), pipeline: cached).value
  let progress = BackgroundProgress()
  let inFlight = ProcessInfo.processInfo.activeProcessorCount * 4
  let background = Task {
    await withTaskGroup(of: Void.self) { group in
      for lane in 0..<inFlight {
        group.addTask {
          var index = lane
          while !progress.stop.load(ordering: .relaxed) {
            _ = await loader.load(ImageSource(photos[index % photos.count]), pipeline: heavy).result
            progress.done.add(1, ordering: .relaxed)
            index += inFlight
          }
        }
      }
    }
  }
  // Wait until the CPU class is full and work queues behind it.
  while loader.scheduler.cpu.waiting == 0 { try await Task.sleep(for: .milliseconds(5)) }
  let clock = ContinuousClock()
  var samples: [Duration] = []
  var queuedDuringHits = 0
  for _ in 0..<hits {
    queuedDuringHits = max(queuedDuringHits, loader.scheduler.cpu.waiting)
    let start = clock.now
    _ = try await loader.load(ImageSource(first), pipeline: cached, priority: .normal).value
    samples.append(clock.now - start)
    try await Task.sleep(for: .milliseconds(2))  // hits arrive spread over the heavy work
  }
  progress.stop.store(true, ordering: .relaxed)
  await background.value
  let p50 = milliseconds(percentile(samples, 0.5))
  let p99 = milliseconds(percentile(samples, 0.99))
  print(
    #"{"hits": \#(hits), "p50_ms": \#(p50), "p99_ms": \#(p99), "max_ms": \#(milliseconds(samples.max() ?? .zero)), "heavy_done": \#(progress.done.load(ordering: .relaxed)), "cpu_queue_max": \#(queuedDuringHits), "cpu_limit": \#(loader.scheduler.cpu.limit)}"#
  )
}

final class BackgroundProgress: Sendable {
  let stop = Atomic<Bool>(false)
  let done = Atomic<Int>(0)
}
