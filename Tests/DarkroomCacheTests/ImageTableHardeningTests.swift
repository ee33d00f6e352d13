import DarkroomCache
import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Image tables under attack: damaged bytes, files truncated by another process, full disks.
/// Real files, real bytes; each test asserts a rule over every byte or size it can reach, not one
/// example.
@Suite("Image tables under attack")
struct ImageTableHardeningTests {
  static let page = Int(sysconf(Int32(_SC_PAGESIZE)))
  static let entryHeader = 256

  static func format(width: Int = 8, height: Int = 6, layout: PixelLayout = .rgb8, maxCount: Int = 2) throws
    -> ImageTableFormat
  {
    try ImageTableFormat(name: "attack", family: "tests", width: width, height: height, layout: layout, maxCount: maxCount)
  }

  static func pixels(_ seed: Int, count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* (seed + 7) &+ seed) }
  }

  /// The info every test stores: every field used, so every header byte means something.
  static func info(_ id: String, width: Int, height: Int) -> ImageTableEntryInfo {
    ImageTableEntryInfo(
      entityID: id, width: width, height: height, writtenAt: Date(timeIntervalSince1970: 1_790_000_000),
      expiresAt: Date(timeIntervalSince1970: 1_790_086_400),
      validators: CacheValidators(etag: "\"v-\(id)\"", lastModified: "Sun, 22 Nov 2026 10:00:00 GMT"),
      sourceTag: Array(repeating: 0xA5, count: 16), userInfo: [1, 2, 3, 4, 5])
  }

  @discardableResult
  static func put(_ table: ImageTable, _ id: String, seed: Int, width: Int? = nil, height: Int? = nil) throws
    -> ImageTableEntry
  {
    let width = width ?? table.format.width
    let height = height ?? table.format.height
    return try pixels(seed, count: width * height * table.format.layout.bytesPerPixel).withUnsafeBytes {
      try table.store(id, pixels: $0, info: info(id, width: width, height: height))
    }
  }

  final class Failures: ImageTableDelegate, Sendable {
    private let errors = Protected<[PipelineError]>([])
    func imageTable(_ table: ImageTable, didFail error: PipelineError) { errors.withLock { $0.append(error) } }
    var all: [PipelineError] { errors.value }
  }

  /// Opens a table again. Retries briefly while it is "in use": a process spawned by another test
  /// in this process holds a copy of the closed table's descriptor (and so its `flock`) between
  /// its fork and its exec.
  static func reopen(_ directory: String, _ format: ImageTableFormat, reset: Bool = false) throws -> ImageTable {
    for attempt in 0... {
      do {
        return try ImageTable(directory: directory, format: format, resetOnMismatch: reset)
      } catch let error as PipelineError where error.code == .cacheInUse && attempt < 100 {
        usleep(10_000)
      }
    }
    throw PipelineError(.cacheUnavailable, "unreachable")
  }

  static func entryHeaderOffset(_ slot: Int) -> Int { page + slot * entryHeader }

  /// A table file holding "a" (full size) and "b" (smaller), closed; returns its bytes and path.
  static func sampleFile(in directory: String, format: ImageTableFormat) throws -> (path: String, bytes: [UInt8]) {
    let table = try ImageTable(directory: directory, format: format)
    try put(table, "a", seed: 1)
    try put(table, "b", seed: 2, width: format.width - 1, height: format.height - 2)
    let path = table.fileURL.path
    return (path, try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
  }

  /// What a retrieve may return: the original entry or nothing.
  static func check(_ table: ImageTable, format: ImageTableFormat, context: String) -> [String: Bool] {
    var problems: [String] = []
    let served = check(table, format: format, context: context, problems: &problems)
    #expect(problems.isEmpty, "\(problems)")
    return served
  }

  /// ``check(_:format:context:)`` off the tests' task pool: what went wrong is added to `problems`.
  static func check(_ table: ImageTable, format: ImageTableFormat, context: String, problems: inout [String]) -> [String: Bool] {
    var served: [String: Bool] = [:]
    for (id, seed, width, height) in [("a", 1, format.width, format.height), ("b", 2, format.width - 1, format.height - 2)] {
      guard let entry = table.retrieve(id) else {
        served[id] = false
        continue
      }
      served[id] = true
      if Array(entry.pixels) != pixels(seed, count: width * height * 3) {
        problems.append("\(context): \(id) served other pixels")
      }
      if entry.info != info(id, width: width, height: height) { problems.append("\(context): \(id) served other info") }
    }
    return served
  }

  @Test("every byte of the file flipped in turn: reopening serves the original entry or misses and reports; never a crash")
  func everyByteFlipped() async throws {
    let directory = try temporaryDirectory("table-flip")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format()
    let (path, original) = try Self.sampleFile(in: directory, format: format)
    #expect(original.count == ImageTable.fileSize(for: format))
    // Thousands of writes and reopenings: on a thread of their own, not on the tests' shared pool.
    let problems = try await onOwnThread { try Self.flipEachByte(of: original, at: path, in: directory, format: format) }
    #expect(problems.isEmpty, "\(problems.count) problems: \(problems.prefix(5))")
  }

  /// Writes the table file with each byte flipped in turn, reopens it each time, and returns
  /// what broke the rules.
  static func flipEachByte(of original: [UInt8], at path: String, in directory: String, format: ImageTableFormat) throws
    -> [String]
  {
    var problems: [String] = []
    func expect(_ holds: Bool, _ message: @autoclosure () -> String) { if !holds { problems.append(message()) } }
    let headers = entryHeaderOffset(0)..<entryHeaderOffset(2)
    // Every byte of the file with 0xFF; every byte of the header page and the entry headers with
    // single bits as well (a flipped bit is what a disk or a careless writer does).
    var flips: [(offset: Int, mask: UInt8)] = (0..<original.count).map { ($0, 0xFF) }
    for offset in Array(0..<256) + Array(headers) { flips += [(offset, 0x01), (offset, 0x80)] }
    for (offset, mask) in flips {
      var bytes = original
      bytes[offset] ^= mask
      try Data(bytes).write(to: URL(fileURLWithPath: path))
      let context = "byte \(offset) ^ \(mask)"
      let table: ImageTable
      do {
        table = try reopen(directory, format)
      } catch let error as PipelineError {
        // Only the header page decides whether the file is used at all.
        expect(offset < page && error.code == .cacheUnavailable, "\(context): \(error)")
        expect(try reopen(directory, format, reset: true).count == 0, "\(context): not emptied")
        continue
      }
      expect(offset >= page, "\(context): a damaged header page was used")
      let failures = Failures()
      table.delegate = failures
      let served = check(table, format: format, context: context, problems: &problems)
      let slot = headers.contains(offset) ? (offset - page) / entryHeader : nil
      let field = (offset - page) % entryHeader
      if let slot, let id = ["a", "b"].dropFirst(slot).first, !(8..<16).contains(field) {
        // Anything but the access counter damaged: that entry is a miss.
        expect(served[id] == false, "\(context): a damaged header of \(id) was used")
        expect(failures.all.contains { $0.code == .cacheCorrupt }, "\(context): not reported")
      }
      if offset >= page + entryHeader * 2 {
        expect(served.values.filter { !$0 }.count <= 1, "\(context): one damaged byte cost more than one entry")
      }
    }
    return problems
  }

  /// An entry header of `format` with its CRC-32 recomputed: what a writer that knows the format
  /// could put there.
  static func sealed(_ header: [UInt8]) -> [UInt8] {
    var header = header
    let crc = Checksum.crc32(Array(header[16..<252]), initial: Checksum.crc32(Array(header[4..<8])))
    withUnsafeBytes(of: crc.littleEndian) { header.replaceSubrange(252..<256, with: $0) }
    return header
  }

  @Test("entry headers with a valid checksum but fields out of range are dropped and reported; random sealed headers never trap")
  func sealedButOutOfRange() throws {
    let directory = try temporaryDirectory("table-range")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format()
    let (path, original) = try Self.sampleFile(in: directory, format: format)
    let start = Self.entryHeaderOffset(0)
    let header = Array(original[start..<start + Self.entryHeader])
    func u32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    func f64(_ value: Double) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } }
    let damage: [(String, Int, [UInt8])] = [
      ("state 3", 0, u32(3)), ("state 0xFFFFFFFF", 0, u32(.max)),
      ("width 0", 32, u32(0)), ("width 9 in an 8-wide table", 32, u32(9)), ("width 2^32-1", 32, u32(.max)),
      ("height 0", 36, u32(0)), ("height 7 in a 6-high table", 36, u32(7)), ("height 2^31", 36, u32(1 << 31)),
      ("written NaN", 16, f64(.nan)), ("written +inf", 16, f64(.infinity)), ("written 1e300", 16, f64(1e300)),
      ("expires -inf", 24, f64(-.infinity)), ("expires 1e19", 24, f64(1e19)),
      ("empty id", 40, [0]), ("id length 65", 40, [65]), ("id length 255", 40, [255]), ("id not UTF-8", 40, [2, 0xC3, 0x28]),
      ("ETag length 65", 105, [65]), ("ETag length 255", 105, [255]), ("Last-Modified length 33", 170, [33]),
      ("Last-Modified length 200", 170, [200]), ("user info length 33", 219, [33]), ("user info length 255", 219, [255]),
    ]
    for (name, offset, bytes) in damage {
      var changed = header
      changed.replaceSubrange(offset..<offset + bytes.count, with: bytes)
      var file = original
      file.replaceSubrange(start..<start + Self.entryHeader, with: offset == 0 ? changed : Self.sealed(changed))
      try Data(file).write(to: URL(fileURLWithPath: path))
      let table = try Self.reopen(directory, format)
      let failures = Failures()
      table.delegate = failures
      #expect(!table.exists("a") && table.retrieve("a") == nil, "\(name): used")
      #expect(failures.all.map(\.code) == [.cacheCorrupt], "\(name): \(failures.all)")
      #expect(Self.check(table, format: format, context: name)["b"] == true, "\(name): b lost")
    }

    // A duplicate id: b's header sealed with a's id; one of them is kept, the other dropped.
    do {
      var file = original
      var second = Array(original[start + Self.entryHeader..<start + 2 * Self.entryHeader])
      second.replaceSubrange(40..<42, with: [1, UInt8(ascii: "a")])
      file.replaceSubrange(start + Self.entryHeader..<start + 2 * Self.entryHeader, with: Self.sealed(second))
      try Data(file).write(to: URL(fileURLWithPath: path))
      let table = try Self.reopen(directory, format)
      #expect(table.count == 1)
    }

    // Random bytes in every field, sealed: whatever is served fits the format and its pixels.
    var generator = SystemRandomNumberGenerator()
    for round in 0..<400 {
      var changed = header
      for index in 4..<252 where Int.random(in: 0..<8, using: &generator) == 0 {
        changed[index] = UInt8.random(in: 0...255, using: &generator)
      }
      if round % 2 == 0 {
        changed.replaceSubrange(32..<40, with: u32(UInt32.random(in: 0...10)) + u32(UInt32.random(in: 0...10)))
      }
      var file = original
      file.replaceSubrange(start..<start + Self.entryHeader, with: Self.sealed(changed))
      try Data(file).write(to: URL(fileURLWithPath: path))
      let table = try Self.reopen(directory, format)
      for info in table.entries {
        #expect((1...format.width).contains(info.width) && (1...format.height).contains(info.height))
        if let entry = table.retrieve(info.entityID) {
          #expect(entry.pixels.count == info.width * info.height * 3)
        }
      }
    }
  }

  @Test("the header page is checked in full: another version is recreated, a foreign or resized file refused or reset")
  func fileHeader() throws {
    let directory = try temporaryDirectory("table-header")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format()
    let (path, original) = try Self.sampleFile(in: directory, format: format)
    func reopen(_ bytes: [UInt8], reset: Bool = false) throws -> ImageTable {
      try Data(bytes).write(to: URL(fileURLWithPath: path))
      return try Self.reopen(directory, format, reset: reset)
    }
    // Version 1 (no header checksums): a cache, recreated even without reset.
    var older = original
    older[8] = 1
    #expect(try reopen(older).count == 0)
    #expect(try reopen(original).count == 2)
    let refused: [(String, [UInt8])] = [
      ("a byte more", original + [0]), ("a page less", Array(original.dropLast(Self.page))),
      ("empty header", Array(repeating: 0, count: 8) + original.dropFirst(8)),
      (
        "version 3",
        {
          var b = original
          b[8] = 3
          return b
        }()
      ),
      (
        "a stray byte in the header page",
        {
          var b = original
          b[Self.page - 1] = 1
          return b
        }()
      ),
      (
        "another family, resealed",
        {
          var b = original
          b[8 + 24 + 8 + 65 + 1] ^= 1
          ImageTable.sealHeaders(&b, format: format)
          return b
        }()
      ),
    ]
    for (name, bytes) in refused {
      #expect(throws: PipelineError.self, "\(name)") { _ = try reopen(bytes) }
      #expect(try reopen(bytes, reset: true).count == 0, "\(name)")
      #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))).count == ImageTable.fileSize(for: format))
    }
  }

  @Test(
    "a file truncated by another process while open, at any size: retrieves miss, stores work, nothing traps; reopening finds only original entries"
  )
  func truncatedWhileOpen() throws {
    let format = try Self.format(maxCount: 3)
    let size = ImageTable.fileSize(for: format)
    let slots = Self.page * 2
    let cuts = [
      0, 1, 100, Self.page - 1, Self.page, Self.page + 300, slots, slots + 10, slots + Self.page, slots + Self.page + 1,
      size - Self.page, size - 1,
    ]
    for cut in cuts {
      let directory = try temporaryDirectory("table-cut")
      defer { try? FileManager.default.removeItem(atPath: directory) }
      do {
        let table = try ImageTable(directory: directory, format: format)
        let failures = Failures()
        table.delegate = failures
        try Self.put(table, "a", seed: 1)
        try Self.put(table, "b", seed: 2, width: 7, height: 4)
        _ = table.retrieve("a")  // a verified, b too (stored here): both could be served from memory
        #expect(truncate(table.fileURL.path, off_t(cut)) == 0)
        _ = Self.check(table, format: format, context: "cut at \(cut)")
        let c = Self.pixels(3, count: 8 * 6 * 3)
        try c.withUnsafeBytes { _ = try table.store("c", pixels: $0, info: Self.info("c", width: 8, height: 6)) }
        let stored = try #require(table.retrieve("c"), "cut at \(cut)")
        #expect(Array(stored.pixels) == c, "cut at \(cut)")
        _ = Self.check(table, format: format, context: "cut at \(cut), after a store")
        #expect(failures.all.allSatisfy { $0.code == .cacheCorrupt }, "cut at \(cut): \(failures.all)")
      }
      let reopened: ImageTable
      do {
        reopened = try Self.reopen(directory, format)
      } catch {
        Issue.record("cut at \(cut): \(error)")
        continue
      }
      _ = Self.check(reopened, format: format, context: "cut at \(cut), reopened")
      #expect(reopened.exists("c"), "cut at \(cut)")
    }
  }

  @Test("a store into a file that another process truncated and regrew does not make earlier entries read as zeros")
  func truncatedBetweenReads() throws {
    let directory = try temporaryDirectory("table-regrow")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format(maxCount: 3)
    let table = try ImageTable(directory: directory, format: format)
    try Self.put(table, "a", seed: 1)
    try Self.put(table, "b", seed: 2, width: 7, height: 4)
    // Cut inside b's slot; a store of c (slot 2, past the cut) would regrow the file with a hole.
    #expect(truncate(table.fileURL.path, off_t(Self.page * 3 + 10)) == 0)
    try Self.put(table, "c", seed: 3)
    let a = try #require(table.retrieve("a"))
    #expect(Array(a.pixels) == Self.pixels(1, count: 8 * 6 * 3))
    #expect(table.retrieve("b") == nil)
  }
}

extension ImageTableHardeningTests {
  @Test("an entry already read once, whose file another process truncates and regrows (zeros), is then a miss, never zeros")
  func regrownAfterARead() throws {
    let directory = try temporaryDirectory("table-regrow-read")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format(maxCount: 2)
    let table = try ImageTable(directory: directory, format: format)
    try Self.put(table, "a", seed: 1)
    let first = try #require(table.retrieve("a"))
    #expect(Array(first.pixels) == Self.pixels(1, count: 8 * 6 * 3))
    // Another process cuts the file at its header pages and sizes it again: the slots are zeros.
    let size = ImageTable.fileSize(for: format)
    #expect(truncate(table.fileURL.path, off_t(size - 2 * format.slotBytes)) == 0)
    #expect(truncate(table.fileURL.path, off_t(size)) == 0)
    let failures = Failures()
    table.delegate = failures
    #expect(table.retrieve("a") == nil)
    #expect(failures.all.contains { $0.code == .cacheCorrupt })
  }

  @Test("the imagetable fuzz seed is a valid table of the harness's format, so fuzzing starts from real entries")
  func fuzzSeed() throws {
    let seed = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("FuzzRegressions/imagetable/valid-table.bin")
    let bytes = try [UInt8](Data(contentsOf: seed))
    let directory = try temporaryDirectory("table-seed")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try Data(bytes.dropFirst()).write(to: URL(fileURLWithPath: directory + "/fuzz.imagetable"))
    let format = try ImageTableFormat(name: "fuzz", width: 8, height: 8, layout: .rgb8, maxCount: 4)
    let table = try ImageTable(directory: directory, format: format)
    #expect(table.entries.map(\.entityID).sorted() == ["a", "b"])
    let entry = try #require(table.retrieve("b"))
    #expect(Array(entry.pixels) == (0..<45).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) })
  }
}

/// Whether ``withPrivateTmpfs(size:_:)`` can mount (root, or a user namespace).
let privateTmpfsAvailable: Bool = (try? withPrivateTmpfs(size: "64k") { _ in true }) == true

final class ResultBox<T>: @unchecked Sendable {
  var result: Result<T, any Error>?  // written by the thread before it signals
}

/// `unshare(2)`, which Glibc's Swift module does not declare (it is a GNU extension).
let unshareCall: (@convention(c) (Int32) -> Int32)? = {
  guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "unshare") else { return nil }
  return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
}()

/// Runs `body` on a new thread in a private mount namespace, where a `size` tmpfs is mounted on a
/// new directory (passed to `body`): the file system vanishes with the namespace. Files opened
/// there stay usable from any thread. `nil` when mount namespaces are not available (not root).
func withPrivateTmpfs<T: Sendable>(size: String, _ body: @escaping @Sendable (String) throws -> T) throws -> T? {
  let directory = try temporaryDirectory("tmpfs")
  defer { try? FileManager.default.removeItem(atPath: directory) }
  let box = ResultBox<T>()
  let done = DispatchSemaphore(value: 0)
  let thread = Thread {
    defer { done.signal() }
    let cloneNewNS: Int32 = 0x0002_0000
    let msRec: UInt = 16384
    let msPrivate: UInt = 1 << 18
    guard let unshare = unshareCall, unshare(cloneNewNS) == 0, mount("none", "/", nil, msRec | msPrivate, nil) == 0,
      mount("tmpfs", directory, "tmpfs", 0, "size=\(size)") == 0
    else { return }
    box.result = Result { try body(directory) }
  }
  thread.start()
  done.wait()
  return try box.result.map { try $0.get() }
}

@Suite(
  "Image tables on a full disk", .serialized,
  .enabled(if: privateTmpfsAvailable, "needs a private mount namespace (root) to mount a small tmpfs"))
struct ImageTableFullDiskTests {
  @Test("a table that does not fit fails at open, clearly; a store that hits ENOSPC fails clearly and the table stays usable")
  func fullDisk() throws {
    struct Outcome: Sendable {
      var openError: String?
      var leftOver: Int?
      var storeError: PipelineError?
      var afterFailure: [String: Bool] = [:]
      var retried: Bool = false
      var reopened: [String] = []
    }
    let found = try withPrivateTmpfs(size: "1m") { directory -> Outcome in
      var outcome = Outcome()
      // 100 slots of 16 KiB do not fit 1 MiB: refused at open, nothing left taking the space.
      let big = try ImageTableFormat(name: "big", width: 64, height: 64, layout: .rgba8, maxCount: 100)
      do {
        _ = try ImageTable(directory: directory, format: big)
      } catch let error as PipelineError {
        outcome.openError = "\(error.code.rawValue): \(error.message)"
      }
      outcome.leftOver = (try? FileManager.default.attributesOfItem(atPath: directory + "/big.imagetable")[.size] as? Int) ?? nil

      let format = try ImageTableHardeningTests.format(maxCount: 3)
      do {
        let table = try ImageTable(directory: directory, format: format)
        try ImageTableHardeningTests.put(table, "a", seed: 1)
        try ImageTableHardeningTests.put(table, "b", seed: 2, width: 7, height: 4)
        // Slot 2 becomes a hole (as in a file copied sparse), then the disk fills up.
        let size = ImageTable.fileSize(for: format)
        #expect(truncate(table.fileURL.path, off_t(size - format.slotBytes)) == 0)
        #expect(truncate(table.fileURL.path, off_t(size)) == 0)
        // Close-on-exec: a runner spawned by a test running alongside would keep it open (and the space
        // taken) after the unlink.
        let filler = open(directory + "/filler", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        let chunk = [UInt8](repeating: 7, count: 65536)
        while chunk.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) > 0 {}
        close(filler)
        do {
          try ImageTableHardeningTests.put(table, "c", seed: 3)
        } catch let error as PipelineError {
          outcome.storeError = error
        }
        outcome.afterFailure = ImageTableHardeningTests.check(table, format: format, context: "full disk")
        outcome.afterFailure["c"] = table.exists("c") || table.retrieve("c") != nil
        unlink(directory + "/filler")
        try ImageTableHardeningTests.put(table, "c", seed: 3)
        outcome.retried =
          table.retrieve("c").map { Array($0.pixels) == ImageTableHardeningTests.pixels(3, count: 8 * 6 * 3) } ?? false
      }
      outcome.reopened = try ImageTableHardeningTests.reopen(directory, format).entries.map(\.entityID).sorted()
      return outcome
    }
    let outcome = try #require(found)
    #expect(outcome.openError?.hasPrefix("cacheUnavailable") == true, "\(outcome.openError ?? "opened")")
    #expect(outcome.openError?.contains("No space left on device") == true && outcome.openError?.contains("maxCount") == true)
    #expect(outcome.leftOver == 0, "the refused table still takes \(outcome.leftOver ?? -1) bytes")
    #expect(outcome.storeError?.code == .cacheFailed, "\(String(describing: outcome.storeError))")
    #expect(outcome.storeError?.message.contains("No space left on device") == true)
    #expect(outcome.afterFailure == ["a": true, "b": true, "c": false])
    #expect(outcome.retried)
    #expect(outcome.reopened == ["a", "b", "c"])
  }
}

extension ImageTableHardeningTests {
  @Test("a symlink where the table file belongs is never followed: the link is replaced, what it names is untouched")
  func symlinkedTableFile() throws {
    let directory = try temporaryDirectory("table-symlink")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let format = try Self.format(maxCount: 2)
    let outside = directory + "/outside"
    try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: directory + "/tables", withIntermediateDirectories: true)
    let tablePath = directory + "/tables/" + format.name + ".imagetable"
    // Dangling (the open would create the target) and pointing at an existing file.
    for target in [outside + "/created-through-link", outside + "/victim"] {
      if target.hasSuffix("victim") { try Data("keep me".utf8).write(to: URL(fileURLWithPath: target)) }
      try? FileManager.default.removeItem(atPath: tablePath)
      #expect(symlink(target, tablePath) == 0)
      let table = try ImageTable(directory: directory + "/tables", format: format)
      try Self.put(table, "a", seed: 1)
      #expect(table.retrieve("a") != nil)
      #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: tablePath)) == nil, "the link was replaced")
    }
    #expect(!FileManager.default.fileExists(atPath: outside + "/created-through-link"))
    #expect((try? String(contentsOfFile: outside + "/victim", encoding: .utf8)) == "keep me")
  }
}
