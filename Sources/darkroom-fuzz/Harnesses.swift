import Darkroom
import DarkroomCache
import DarkroomCurl
import DarkroomHTTP
import Foundation
import GRDB

#if canImport(Glibc)
  import Glibc
#endif

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
  /// A disk store whose index rows (any value in any column), schema and entry files (bytes, a
  /// FIFO, a symlink, a folder, a symlinked folder) come from the input, then every operation:
  /// no crash, no hang, and canary files beside the store survive.
  case disk
  /// An image server request path (and, after a newline, an Accept header) → thumbor URL parsing,
  /// signature check, filters to stages, source policy, format negotiation, log redaction.
  case thumbor

  func run(_ bytes: [UInt8]) {
    switch self {
    case .json: Self.json(bytes)
    case .decode: Self.decode(bytes)
    case .http: _ = ResponseInterpretation.interpret(bytes)
    case .cache: Self.cache(bytes)
    case .imagetable: Self.imageTable(bytes)
    case .disk: DiskHarness.run(bytes)
    case .thumbor: Self.thumbor(bytes)
    }
  }

  static let serverConfiguration: ServerConfiguration = {
    var configuration = ServerConfiguration()
    configuration.origin = "https://origin.example/media/"
    configuration.allowHosts = ["images.example", "*.cdn.example"]
    configuration.key = "fuzz"
    configuration.allowUnsafe = true
    return configuration
  }()

  static func thumbor(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
    let path = String(parts.first ?? "")
    let accept = parts.count > 1 ? String(parts[1]) : nil
    _ = ImageServer.redacted(path)
    _ = ImageServer.matches(accept ?? "", etag: "\"abc\"")
    _ = FormatNegotiation().choose(accept: accept, hasAlpha: bytes.first.map { $0 & 1 == 1 } ?? false)
    guard let url = try? ThumborURL(path: path) else { return }
    _ = ThumborSignature(key: "fuzz").verify(url)
    _ = try? ThumborOperations(configuration: serverConfiguration).stages(for: url, accept: accept)
    _ = try? SourcePolicy(serverConfiguration).source(for: url.image)
  }

  static func json(_ bytes: [UInt8]) {
    _ = try? PipelineDefinition.loadSet(
      json: String(decoding: bytes, as: UTF8.self), registry: Darkroom.standardRegistry,
      context: StageBuildContext(validatingOnly: true))
  }

  static func decode(_ bytes: [UInt8]) {
    let fetched = FetchedData(source: ImageSource(path: "fuzz.img"), bytes: ImageBytes(bytes))
    guard let decoded = try? ImageDecoder().decode(fetched),
      let resized = try? Resizer(width: 300, height: 300, mode: .fit).resize(decoded)
    else { return }
    _ = try? ImageEncoder(.jpeg(quality: 80)).encode(resized)
    // A GIF keeps its own colour tables: the table walk and the mapped encoder on every frame.
    if decoded.sourceFormat == .gif, let again = try? ImageDecoder().decode(fetched),
      let small = try? Resizer(width: 64, height: 64, mode: .fit).resize(again)
    {
      _ = try? ImageEncoder(.gif()).encode(small)
    }
  }

  /// A scratch directory with a disk store holding one entry, and an image-table format; removed
  /// when the process exits (libFuzzer's `-max_total_time`, or the end of a replay).
  static let scratch: String = {
    let path = scratchPath()
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: Harness.scratchPath()) }
    return path
  }()

  private static func scratchPath() -> String {
    NSTemporaryDirectory() + "darkroom-fuzz-\(ProcessInfo.processInfo.processIdentifier)"
  }

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

/// The `disk` harness: the input decides index rows, schema damage and what lies where the
/// entry file of the key "fuzz" belongs.
///
/// Input: a flags byte (bits 0-2: what is at the entry's place; bits 3-5: schema damage), a row
/// count byte, ten cells per row (a tag byte, then its bytes), and the rest: the entry file's bytes.
enum DiskHarness {
  static let root = Harness.scratch + "/disk-index"
  static let store = root + "/store"
  static let sibling = root + "/sibling"
  static let key = "fuzz"
  static let columns = ["key", "source", "file", "size", "type", "storedAt", "expiresAt", "accessedAt", "etag", "lastModified"]
  /// The entry file's name for `key`: entries/ab/<sha256>.
  static let relative: String = {
    guard let scratch = try? DiskStore(directory: root + "/names") else { return "entries/00/x" }
    return String(scratch.filePath(forKey: key).dropFirst(scratch.directory.count + 1))
  }()
  /// Files outside the store that must survive anything the store does.
  static var canaries: [String] {
    let parts = relative.split(separator: "/").map(String.init)
    return [root + "/canary", sibling + "/canary", sibling + "/" + parts[1] + "/" + parts[2], sibling + "/" + parts[2]]
  }

  struct Reader {
    var bytes: [UInt8]
    var offset = 0
    mutating func byte() -> UInt8 {
      guard offset < bytes.count else { return 0 }
      defer { offset += 1 }
      return bytes[offset]
    }
    mutating func take(_ count: Int) -> [UInt8] {
      let end = min(bytes.count, offset + count)
      defer { offset = end }
      return Array(bytes[offset..<end])
    }
    mutating func word() -> UInt64 { take(8).reversed().reduce(0) { $0 << 8 | UInt64($1) } }
    var rest: [UInt8] { offset < bytes.count ? Array(bytes[offset...]) : [] }
  }

  static func cell(_ reader: inout Reader, column: Int) -> DatabaseValue {
    let now = Date().timeIntervalSince1970
    switch reader.byte() % 12 {
    case 0: return .null
    case 1: return Int64(bitPattern: reader.word()).databaseValue
    case 2: return Double(bitPattern: reader.word()).databaseValue
    case 3: return String(decoding: reader.take(Int(reader.byte())), as: UTF8.self).databaseValue
    case 4: return Data(reader.take(Int(reader.byte()))).databaseValue
    case 5: return key.databaseValue
    case 6: return "../../canary".databaseValue
    case 7: return (root + "/canary").databaseValue
    case 8: return relative.databaseValue
    case 10: return [Int64.max, Int64.min, -1, 1 << 62][Int(reader.byte() % 4)].databaseValue
    case 11: return [Double.nan, .infinity, -.infinity, 1e300, -0.0, 0.5][Int(reader.byte() % 6)].databaseValue
    default:
      let good: [DatabaseValueConvertible?] = [key, "fuzz.jpg", relative, 100, "fetched-data", now, nil, now, nil, nil]
      return good[column]?.databaseValue ?? .null
    }
  }

  static let damage = [
    "DROP TABLE entries", "DROP TABLE entries; CREATE TABLE entries (key TEXT)",
    "DROP TABLE entries; CREATE VIEW entries AS SELECT 1 AS key", "ALTER TABLE entries DROP COLUMN size",
    "PRAGMA user_version = 0", "DROP INDEX entries_accessed", "UPDATE entries SET size = size * 2",
  ]

  static func run(_ bytes: [UInt8]) {
    var reader = Reader(bytes: bytes)
    let flags = reader.byte()
    let rowCount = 1 + Int(reader.byte() % 3)
    var cells: [[DatabaseValue]] = []
    for _ in 0..<rowCount { cells.append((0..<10).map { cell(&reader, column: $0) }) }
    let rows = cells
    let file = reader.rest
    try? FileManager.default.removeItem(atPath: store)
    try? FileManager.default.removeItem(atPath: sibling)
    for canary in canaries {
      try? FileManager.default.createDirectory(
        atPath: (canary as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
      _ = FileManager.default.createFile(atPath: canary, contents: Data("canary".utf8))
    }
    if let opened = try? DiskStore(directory: store, maxBytes: 1 << 20, maxCount: 2) {
      exercise(opened, rows: rows, flags: flags, file: file)
    }
    for canary in canaries where !FileManager.default.fileExists(atPath: canary) {
      fatalError("the disk store removed \(canary), outside it")
    }
  }

  /// Fills the index from `rows`, damages its schema as `flags` say, places the entry file, then
  /// runs every operation of the store (and opens it again).
  static func exercise(_ opened: DiskStore, rows: [[DatabaseValue]], flags: UInt8, file: [UInt8]) {
    let fetched = FetchedData(source: ImageSource(path: "fuzz.jpg"), bytes: ImageBytes([0xFF, 0xD8, 0xFF, 0xD9]))
    if flags & 7 == 4 {
      Harness.blocking { try? await opened.setEntry(CacheEntry(value: fetched), forKey: key, source: "fuzz.jpg") }
    }
    if let queue = try? DatabaseQueue(path: store + "/index.sqlite") {
      queue.writeWithoutTransaction { db in
        for row in rows {
          try? db.execute(
            sql: "INSERT OR REPLACE INTO entries (\(columns.joined(separator: ", "))) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: StatementArguments(row))
        }
        let schema = Int(flags >> 3 & 7)
        if schema < damage.count { try? db.execute(sql: damage[schema]) }
      }
    }
    place(flags & 7, file: file)
    let other = FetchedData(source: ImageSource(path: "other.jpg"), bytes: ImageBytes(Array(file.prefix(64))))
    Harness.blocking {
      _ = try? await opened.entry(forKey: key)
      for (index, row) in rows.enumerated() {
        if case .string(let text) = row[0].storage { _ = try? await opened.entry(forKey: text) }
        try? await opened.setEntry(CacheEntry(value: other), forKey: "other-\(index)", source: "other.jpg")
      }
      _ = try? await opened.statistics()
      _ = try? await opened.purge(source: ImageSource("fuzz.jpg"))
    }
    place(flags & 7, file: file)
    Harness.blocking {
      _ = try? await opened.removeStrayFiles()
      _ = try? await opened.entry(forKey: key)
      try? await opened.removeEntry(forKey: key)
      try? await opened.removeAll()
    }
    if let again = try? DiskStore(directory: store) {
      Harness.blocking {
        _ = try? await again.entry(forKey: key)
        _ = try? await again.statistics()
      }
    }
  }

  /// Puts what `kind` says where the entry of `key` belongs.
  static func place(_ kind: UInt8, file: [UInt8]) {
    let path = store + "/" + relative
    let folder = (path as NSString).deletingLastPathComponent
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    switch kind {
    case 0, 4:
      var bytes = file
      if kind == 4, var existing = FileManager.default.contents(atPath: path).map(Array.init) {
        for (index, byte) in file.prefix(existing.count).enumerated() where byte != 0 { existing[index] ^= byte }
        bytes = existing
      }
      unlink(path)
      _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    case 1:
      unlink(path)
      mkfifo(path, 0o644)
    case 2:
      unlink(path)
      symlink(root + "/canary", path)
    case 3:
      unlink(path)
      mkdir(path, 0o755)
    case 6:
      try? FileManager.default.removeItem(atPath: store + "/entries")
      symlink(sibling, store + "/entries")
    case 7:
      try? FileManager.default.removeItem(atPath: folder)
      symlink(sibling, folder)
    default: break
    }
  }
}
