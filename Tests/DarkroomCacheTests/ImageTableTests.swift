import DarkroomCache
import DarkroomCore
import Foundation
import Testing

@Suite("Image tables")
struct ImageTableTests {
  func format(maxCount: Int = 4, layout: PixelLayout = .rgb8) throws -> ImageTableFormat {
    try ImageTableFormat(name: "thumb-32", family: "thumbs", width: 32, height: 24, layout: layout, maxCount: maxCount)
  }

  /// Distinct pixels per seed.
  func pixels(_ seed: Int, width: Int = 32, height: Int = 24, bands: Int = 3) -> [UInt8] {
    (0..<(width * height * bands)).map { UInt8(truncatingIfNeeded: $0 &* (seed + 3) &+ seed) }
  }

  @discardableResult
  func put(_ table: ImageTable, _ id: String, seed: Int) throws -> ImageTableEntry {
    try pixels(seed).withUnsafeBytes {
      try table.store(id, pixels: $0, info: ImageTableEntryInfo(entityID: id, width: 32, height: 24))
    }
  }

  final class Failures: ImageTableDelegate, Sendable {
    private let errors = Protected<[PipelineError]>([])
    func imageTable(_ table: ImageTable, didFail error: PipelineError) { errors.withLock { $0.append(error) } }
    var codes: [PipelineError.Code] { errors.withLock { $0.map(\.code) } }
  }

  final class Count: Sendable {
    private let value = Protected(0)
    func increment() { value.withLock { $0 += 1 } }
    var current: Int { value.value }
  }

  @Test("pixels round-trip, page-aligned, rows packed")
  func roundTrip() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let table = try ImageTable(directory: directory, format: format())
    try put(table, "a", seed: 1)
    let entry = try #require(table.retrieve("a"))
    #expect(Array(entry.pixels) == pixels(1))
    #expect(entry.rowBytes == 96 && entry.width == 32 && entry.height == 24)
    #expect(Int(bitPattern: entry.pixels.baseAddress) % 4096 == 0)
    #expect(table.exists("a") && !table.exists("b") && table.retrieve("b") == nil)
    let smaller = pixels(2, width: 10, height: 5)
    try smaller.withUnsafeBytes {
      _ = try table.store("small", pixels: $0, info: ImageTableEntryInfo(entityID: "small", width: 10, height: 5))
    }
    let small = try #require(table.retrieve("small"))  // the entry owns the pixels: keep it while reading them
    #expect(Array(small.pixels) == smaller)
  }

  @Test("the least recently used unleased entry is replaced at maxCount; retrieving refreshes")
  func lru() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let table = try ImageTable(directory: directory, format: format(maxCount: 3))
    for (index, id) in ["a", "b", "c"].enumerated() { try put(table, id, seed: index) }
    _ = table.retrieve("a")
    try put(table, "d", seed: 3)
    #expect(!table.exists("b") && table.exists("a") && table.exists("c") && table.exists("d"))
    let lease = try #require(table.retrieve("c"))  // c is leased: never replaced
    _ = table.retrieve("a")
    _ = table.retrieve("d")
    try put(table, "e", seed: 4)
    #expect(table.exists("c") && !table.exists("a") && table.count == 3)
    #expect(Array(lease.pixels) == pixels(2))
  }

  @Test("a store fails clearly when every slot is leased; sizes and ids are checked")
  func limits() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let table = try ImageTable(directory: directory, format: format(maxCount: 2))
    let held = [try put(table, "a", seed: 1), try put(table, "b", seed: 2)]
    #expect(throws: PipelineError.self) { try put(table, "c", seed: 3) }
    #expect(held.count == 2)
    #expect(throws: PipelineError.self) { try put(table, String(repeating: "x", count: 65), seed: 1) }
    let big = pixels(1, width: 40, height: 24)
    #expect(throws: PipelineError.self) {
      try big.withUnsafeBytes {
        _ = try table.store("big", pixels: $0, info: ImageTableEntryInfo(entityID: "big", width: 40, height: 24))
      }
    }
    #expect(throws: PipelineError.self) { try ImageTableFormat(name: "../x", width: 1, height: 1, layout: .rgb8, maxCount: 1) }
  }

  @Test("entries and their recency survive closing and reopening; a second open is refused")
  func reopen() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    do {
      let table = try ImageTable(directory: directory, format: format(maxCount: 3))
      for (index, id) in ["a", "b", "c"].enumerated() { try put(table, id, seed: index) }
      _ = table.retrieve("a")
      #expect {
        _ = try ImageTable(directory: directory, format: format(maxCount: 3))
      } throws: { ($0 as? PipelineError)?.code == .cacheInUse }
    }
    let reopened = try ImageTable(directory: directory, format: format(maxCount: 3))
    #expect(reopened.count == 3)
    let c = try #require(reopened.retrieve("c"))
    #expect(Array(c.pixels) == pixels(2))
    _ = reopened.retrieve("a")
    try put(reopened, "d", seed: 3)  // b is the least recently used
    #expect(!reopened.exists("b"))
  }

  @Test("another format on reopen is refused, or reset on request")
  func formatMismatch() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    do { try put(try ImageTable(directory: directory, format: format()), "a", seed: 1) }
    #expect(throws: PipelineError.self) { _ = try ImageTable(directory: directory, format: format(maxCount: 8)) }
    let reset = try ImageTable(directory: directory, format: format(maxCount: 8), resetOnMismatch: true)
    #expect(reset.count == 0)
  }

  @Test("a flipped byte on disk is a miss reported to the delegate; a write left unfinished is cleared on open")
  func crashSafety() throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path: String
    do {
      let table = try ImageTable(directory: directory, format: format())
      try put(table, "a", seed: 1)
      try put(table, "b", seed: 2)
      path = table.fileURL.path
    }
    // Slot 0 holds "a", slot 1 "b": damage a's pixels, and leave b's state word at "writing".
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    let page = 4096
    let slots = page + ((4 * 256 + page - 1) / page) * page
    try handle.seek(toOffset: UInt64(slots + 100))
    let original = try #require(try handle.read(upToCount: 1))
    try handle.seek(toOffset: UInt64(slots + 100))
    try handle.write(contentsOf: [original[0] ^ 0xFF])
    try handle.seek(toOffset: UInt64(page + 256))
    try handle.write(contentsOf: [1, 0, 0, 0])
    try handle.close()

    let table = try ImageTable(directory: directory, format: format())
    let failures = Failures()
    table.delegate = failures
    #expect(!table.exists("b"))
    #expect(table.exists("a"))
    #expect(table.retrieve("a") == nil)
    #expect(failures.codes == [.cacheCorrupt])
    #expect(table.count == 0)
  }

  @Test("200 concurrent retrieves of 20 ids run each provider once; cancel fails the waiters; reset empties")
  func providers() async throws {
    let directory = try temporaryDirectory("table")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let table = try ImageTable(directory: directory, format: format(maxCount: 32))
    let runs = Count()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for request in 0..<200 {
        let id = request % 20
        group.addTask {
          let entry = try await table.retrieve("id\(id)") {
            runs.increment()
            await Task.yield()
            return ImageTable.Pixels(width: 32, height: 24, bytes: self.pixels(id))
          }
          #expect(Array(entry.pixels) == self.pixels(id))
        }
      }
      try await group.waitForAll()
    }
    #expect(runs.current == 20 && table.count == 20)

    let gate = Latch()
    let waiting = Task {
      try await table.retrieve("slow") {
        try? await gate.waitUnlessCancelled()
        try Task.checkCancellation()
        return ImageTable.Pixels(width: 32, height: 24, bytes: self.pixels(9))
      }
    }
    while !table.isProviding("slow") { await Task.yield() }
    table.cancel("slow")
    gate.open()
    await #expect(throws: CancellationError.self) { _ = try await waiting.value }
    #expect(!table.exists("slow"))
    table.reset()
    #expect(table.count == 0 && !table.exists("id3"))
  }
}

@Suite("Image table families")
struct ImageTableSetTests {
  @Test("tables are found by name and family; deleting an entity clears every size of it")
  func families() throws {
    let directory = try temporaryDirectory("table-set")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let formats = try [(16, "avatars"), (32, "avatars"), (8, "icons")].map { size, family in
      try ImageTableFormat(name: "\(family)-\(size)", family: family, width: size, height: size, layout: .gray8, maxCount: 4)
    }
    let set = try ImageTableSet(directory: directory, formats: formats)
    for table in set.tables(inFamily: "avatars") + set.tables(inFamily: "icons") {
      let side = table.format.width
      let pixels = [UInt8](repeating: UInt8(side), count: side * side)
      _ = try pixels.withUnsafeBytes {
        try table.store("user-1", pixels: $0, info: ImageTableEntryInfo(entityID: "", width: side, height: side))
      }
    }
    #expect(set.tables(inFamily: "avatars").map(\.format.name) == ["avatars-16", "avatars-32"])
    let icon = set.table(named: "icons-8")?.retrieve("user-1")
    #expect(icon?.pixels.first == 8)
    set.delete("user-1", inFamily: "avatars")
    #expect(!set.exists("user-1", inFamily: "avatars") && set.exists("user-1", inFamily: "icons"))
    #expect(throws: PipelineError.self) { _ = try ImageTableSet(directory: directory + "/2", formats: [formats[0], formats[0]]) }
  }
}
