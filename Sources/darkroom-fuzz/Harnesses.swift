import Darkroom
@_spi(Fuzzing) import DarkroomCache
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
  /// An image-table file (flags byte, then the file) opened, every entry retrieved, one stored,
  /// optionally after truncating the file under the open table.
  case imagetable

  func run(_ bytes: [UInt8]) {
    switch self {
    case .json: Self.json(bytes)
    case .decode: Self.decode(bytes)
    case .http: _ = ResponseInterpretation.interpret(bytes)
    case .cache: Self.cache(bytes)
    case .imagetable: Self.imageTable(bytes)
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

  /// Input: a flags byte, then the bytes of an image-table file of `tableFormat` (8×8 RGB, 4
  /// slots). Flags: 1 recomputes the header checksums (so that changes reach the range checks
  /// behind them), 2 pads or cuts the file to the format's size (so that the size check passes),
  /// 4 opens with reset on mismatch, 8 truncates the file under the open table (at the high four
  /// bits × 1/16 of its size) before reading. Every entry is retrieved — what is served must fit
  /// the format and its checksum — then one is stored and read back. Any `PipelineError` is fine.
  static func imageTable(_ bytes: [UInt8]) {
    guard let tableFormat, let flags = bytes.first else { return }
    let directory = scratch + "/imagetable"
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var file = Array(bytes.dropFirst())
    let size = ImageTable.fileSize(for: tableFormat)
    if flags & 2 != 0 { file = Array(file.prefix(size)) + Array(repeating: 0, count: max(0, size - file.count)) }
    if flags & 1 != 0 { ImageTable.sealHeaders(&file, format: tableFormat) }
    guard (try? Data(file).write(to: URL(fileURLWithPath: directory + "/fuzz.imagetable"))) != nil,
      let table = try? ImageTable(directory: directory, format: tableFormat, resetOnMismatch: flags & 4 != 0)
    else { return }
    if flags & 8 != 0 { _ = truncate(table.fileURL.path, off_t(size / 16 * Int(flags >> 4))) }
    for info in table.entries {
      guard (1...8).contains(info.width), (1...8).contains(info.height) else {
        fatalError("served a \(info.width)×\(info.height) entry")
      }
      guard let entry = table.retrieve(info.entityID) else { continue }
      guard entry.pixels.count == info.width * info.height * 3, entry.info == info else {
        fatalError("an entry unlike its header")
      }
    }
    let pixels = [UInt8](repeating: flags, count: 8 * 8 * 3)
    let stored = try? pixels.withUnsafeBytes {
      try table.store("fuzz", pixels: $0, info: ImageTableEntryInfo(entityID: "fuzz", width: 8, height: 8))
    }
    guard stored == nil || table.retrieve("fuzz").map({ Array($0.pixels) == pixels }) != false else {
      fatalError("a stored entry read back different")
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
