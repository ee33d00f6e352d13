import Darkroom
@_spi(Fuzzing) import DarkroomCurl
import Foundation

/// The fuzz harnesses: each takes arbitrary bytes through one of Darkroom's input paths with the
/// production limits. Any `PipelineError` is a correct answer; a crash, a hang, an unbounded
/// allocation or a sanitizer report is a bug.
enum Harness: String, CaseIterable {
  /// Pipeline JSON → parse, validate, build (validation only: nothing is opened).
  case json
  /// Bytes → decode (trusted formats, `maxPixels` from the header) → resize to 300×300 → JPEG.
  case decode
  /// A raw HTTP response (status line, headers, body) → header parsing, classification,
  /// freshness and validators, format sniffing.
  case http
  /// A corrupted disk-cache entry file read back, and a corrupted image-table file opened.
  case cache

  func run(_ bytes: [UInt8]) {
    switch self {
    case .json: Self.json(bytes)
    case .decode: Self.decode(bytes)
    case .http: _ = ResponseInterpretation.interpret(bytes)
    case .cache: Self.cache(bytes)
    }
  }

  static func json(_ bytes: [UInt8]) {
    _ = try? PipelineDefinition.loadSet(
      json: String(decoding: bytes, as: UTF8.self), registry: Darkroom.standardRegistry,
      context: StageBuildContext(validatingOnly: true))
  }

  static func decode(_ bytes: [UInt8]) {
    let fetched = FetchedData(source: ImageSource(path: "fuzz.img"), bytes: ImageBytes(bytes))
    guard let decoded = try? Decoder().decode(fetched),
      let resized = try? Resizer(width: 300, height: 300, mode: .fit).resize(decoded)
    else { return }
    _ = try? Encoder(.jpeg(quality: 80)).encode(resized)
  }

  /// A scratch directory with a disk store holding one entry, and an image-table format.
  static let scratch: String = {
    let path = NSTemporaryDirectory() + "darkroom-fuzz-\(ProcessInfo.processInfo.processIdentifier)"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }()

  static let tableFormat = try? ImageTableFormat(name: "fuzz", width: 8, height: 8, layout: .rgb8, maxCount: 4)

  static func cache(_ bytes: [UInt8]) {
    // A disk-cache entry file replaced by the bytes: reading it is a miss or an error.
    blocking {
      guard let store = try? DiskStore(directory: scratch + "/disk") else { return }
      let value = FetchedData(source: ImageSource(path: "fuzz.jpg"), bytes: ImageBytes([0xFF, 0xD8, 0xFF, 0xD9]))
      try? await store.setEntry(CacheEntry(value: value), forKey: "fuzz", source: "fuzz.jpg")
      try? Data(bytes).write(to: URL(fileURLWithPath: store.filePath(forKey: "fuzz")))
      _ = try? await store.entry(forKey: "fuzz")
    }
    // An image-table file replaced by the bytes: opening it resets or refuses it; reading an
    // entry never returns pixels that fail their checksum.
    guard let tableFormat else { return }
    let tables = scratch + "/tables"
    try? FileManager.default.createDirectory(atPath: tables, withIntermediateDirectories: true)
    try? Data(bytes).write(to: URL(fileURLWithPath: tables + "/fuzz.imagetable"))
    if let table = try? ImageTable(directory: tables, format: tableFormat) {
      for id in ["a", "b", "fuzz"] { _ = table.retrieve(id) }
    }
  }

  /// Runs async work to completion from the fuzzer's thread (not a cooperative-pool thread).
  static func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
      await body()
      done.signal()
    }
    done.wait()
  }
}
