import DarkroomCache
import DarkroomCore
import DarkroomTesting
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A work folder holding a store (`store/`) and files outside it that nothing the store does may
/// touch: `canary`, `sibling/canary`, and `sibling/` files named like entries.
struct AttackBench {
  let work: String
  var store: String { work + "/store" }
  var sibling: String { work + "/sibling" }
  var canaries: [String] { [work + "/canary", sibling + "/canary"] }

  init() throws {
    work = try temporaryDirectory("attack")
    try FileManager.default.createDirectory(atPath: sibling, withIntermediateDirectories: true)
    for canary in canaries { try Data("canary".utf8).write(to: URL(fileURLWithPath: canary)) }
  }

  func remove() { try? FileManager.default.removeItem(atPath: work) }

  /// True when every canary is there with its content.
  var canariesSurvive: Bool {
    canaries.allSatisfy { (try? Data(contentsOf: URL(fileURLWithPath: $0))) == Data("canary".utf8) }
  }

  static func image(_ seed: Int) -> EncodedImage {
    let bytes = (0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ seed) }
    return EncodedImage(
      source: ImageSource(path: "/img/\(seed).jpg"), bytes: ImageBytes(bytes), format: .jpeg, width: seed, height: 10)
  }

  static func key(_ seed: Int) -> String {
    CacheKey.make(prefix: "", source: ImageSource(path: "/img/\(seed).jpg").identity, upstream: ["fetch", "encode"])
  }

  static func put(_ store: DiskStore, _ seed: Int) async throws {
    try await store.setEntry(
      CacheEntry(value: image(seed), storedAt: store.now), forKey: key(seed),
      source: ImageSource(path: "/img/\(seed).jpg").identity)
  }

  static func get(_ store: DiskStore, _ seed: Int) async throws -> EncodedImage? {
    try await store.entry(forKey: key(seed))?.value as? EncodedImage
  }

  /// Runs SQL on the store's index through a connection of its own (as another program would).
  func sql(_ text: String, _ arguments: StatementArguments = []) throws {
    let queue = try DatabaseQueue(path: store + "/index.sqlite")
    try queue.writeWithoutTransaction { db in try db.execute(sql: text, arguments: arguments) }
  }

  /// Rebuilds `entries` without column types or NOT NULL, so that any value stays as it is put.
  func looseSchema() throws {
    try sql(
      """
      CREATE TABLE loose (key PRIMARY KEY, source, file, size, type, storedAt, expiresAt, accessedAt, etag, lastModified);
      INSERT INTO loose SELECT key, source, file, size, type, storedAt, expiresAt, accessedAt, etag, lastModified FROM entries;
      DROP TABLE entries; ALTER TABLE loose RENAME TO entries;
      CREATE INDEX entries_source ON entries(source); CREATE INDEX entries_accessed ON entries(accessedAt);
      """)
  }

  /// Whether something (even a dangling symlink) is at `path`.
  static func exists(_ path: String) -> Bool {
    var status = stat()
    return lstat(path, &status) == 0
  }
}

@Suite("Disk store under attack", .timeLimit(.minutes(4)))
struct DiskStoreAttackTests {
  @Test("closing a store while another process holds the index's write lock returns at once; the access times are dropped")
  func closeDoesNotWaitForTheLock() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let opened = try DiskStore(directory: bench.store, maxBytes: 1 << 30, maxCount: 2, pool: nil)
    try await AttackBench.put(opened, 1)
    try await AttackBench.put(opened, 2)
    _ = try await AttackBench.get(opened, 1)  // an access time, kept in the store's batch
    // Another program holds the write lock, on a thread of its own, until told to let go.
    let locked = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let path = bench.store + "/index.sqlite"
    let holder = Thread {
      let queue = try? DatabaseQueue(path: path)
      try? queue?.inTransaction(.immediate) { _ in
        locked.signal()
        release.wait()
        return .commit
      }
      locked.signal()  // (when the lock could not be taken: the test fails below instead of hanging)
    }
    holder.start()
    locked.wait()
    let started = ContinuousClock.now
    await opened.close()
    let waited = ContinuousClock.now - started
    release.signal()
    // Waiting for the lock takes the index's busy timeout, 30 seconds; not waiting takes a hop to
    // the store's thread (the bound leaves room for a test process starved by parallel tests).
    #expect(waited < .seconds(25), "close waited \(waited)")
    // The store stays usable, and the next writer finds the index free.
    try await AttackBench.put(opened, 3)
    #expect(try await AttackBench.get(opened, 3) != nil)
  }

  static let columns = ["key", "source", "file", "size", "type", "storedAt", "expiresAt", "accessedAt", "etag", "lastModified"]
  /// SQL literals an attacker may put in any column (1e999 is +∞ to SQLite; NaN cannot be stored).
  static let values = [
    "'abc'", "''", "X'00FF'", "NULL", "9223372036854775807", "-9223372036854775808", "-1", "1.5", "1e999", "-1e999", "1e300",
  ]

  /// Whether `literal` in `column` is a value the store accepts (`nil`: the key, which moves the
  /// row away from its key instead).
  static func accepted(_ column: String, _ literal: String) -> Bool? {
    switch column {
    case "key": return nil
    case "file": return true  // never read
    case "source": return literal == "'abc'" || literal == "''"
    case "type": return literal == "'abc'"
    case "size": return false
    case "storedAt", "accessedAt": return literal == "1.5"
    case "expiresAt": return literal == "NULL" || literal == "1.5"
    default: return ["'abc'", "''", "NULL"].contains(literal)  // etag, lastModified
    }
  }

  @Test(
    "any value in any column of an index row: no crash, never wrong bytes, a corrupt row is a removed miss, nothing outside is touched",
    arguments: columns)
  func tamperedColumn(column: String) async throws {
    for literal in Self.values {
      let bench = try AttackBench()
      defer { bench.remove() }
      let store = try DiskStore(directory: bench.store, maxCount: 3)
      for seed in 1...3 { try await AttackBench.put(store, seed) }
      try bench.looseSchema()
      // The file column of the other rows points outside the store: only keys name files.
      try bench.sql("UPDATE entries SET file = '../canary' WHERE key = ?", [AttackBench.key(2)])
      try bench.sql("UPDATE entries SET file = '../sibling/canary' WHERE key = ?", [AttackBench.key(3)])
      try bench.sql("UPDATE entries SET \(column) = \(literal) WHERE key = ?", [AttackBench.key(1)])
      let context = Comment(rawValue: "\(column) = \(literal)")

      let found = try await AttackBench.get(store, 1)
      if let found { #expect(found.bytes == AttackBench.image(1).bytes, context) }
      switch Self.accepted(column, literal) {
      case false?:
        #expect(found == nil, context)
        #expect(store.discardedEntries == 1, context)
        #expect(try await store.statistics().entries == 2, context)
        #expect(!AttackBench.exists(store.filePath(forKey: AttackBench.key(1))), context)
      case true? where column != "type" && column != "expiresAt":
        #expect(found != nil, context)
      default: #expect(store.discardedEntries == 0, context)
      }
      #expect(try await AttackBench.get(store, 2) != nil, context)
      _ = try await store.statistics()
      try await AttackBench.put(store, 4)  // evicts (maxCount 3)
      try await store.removeEntry(forKey: AttackBench.key(2))
      _ = try await store.purge(source: ImageSource(path: "/img/3.jpg"))
      _ = try store.sweep()
      #expect(bench.canariesSurvive, context)
      try await store.removeAll()
      #expect(try await store.statistics().entries == 0 || column == "key", context)
      #expect(bench.canariesSurvive, context)
    }
  }

  @Test("oversized and odd sizes never trap the totals or eviction; every column odd at once in many rows")
  func oddAggregates() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let store = try DiskStore(directory: bench.store, maxBytes: 1 << 20, maxCount: 10)
    try await AttackBench.put(store, 1)
    try bench.looseSchema()
    for (index, literal) in Self.values.enumerated() {
      let others = Self.values[(index + 1) % Self.values.count]
      try bench.sql(
        """
        INSERT INTO entries VALUES ('odd-\(index)', \(literal), '../canary', \(literal), \(others), \(literal), \(others),
          \(literal), \(literal), \(others))
        """)
    }
    try bench.sql(
      "INSERT INTO entries SELECT key || '-big', source, file, 9223372036854775807, type, storedAt, expiresAt, accessedAt, etag, lastModified FROM entries"
    )
    let stats = try await store.statistics()
    #expect(stats.entries == 2 * (Self.values.count + 1))
    #expect(stats.bytes >= 0 && stats.bytes < 1 << 20)
    for index in Self.values.indices { #expect(try await store.entry(forKey: "odd-\(index)") == nil) }
    try await AttackBench.put(store, 2)  // eviction walks the odd rows
    #expect(try await AttackBench.get(store, 2) != nil)
    _ = try store.sweep()  // rows that do not decode go
    #expect(try await store.statistics().entries <= 3)
    #expect(bench.canariesSurvive)
  }

  @Test("a missing table or column is a clear cacheUnavailable when opening and cacheFailed when it goes while open")
  func damagedSchema() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let store = try DiskStore(directory: bench.store)
    try await AttackBench.put(store, 1)
    try bench.sql("DROP TABLE entries")
    await #expect { try await AttackBench.get(store, 1) } throws: { ($0 as? PipelineError)?.code == .cacheFailed }
    await #expect { try await store.statistics() } throws: { ($0 as? PipelineError)?.code == .cacheFailed }
    await #expect { try await store.removeAll() } throws: { ($0 as? PipelineError)?.code == .cacheFailed }
    #expect { _ = try DiskStore(directory: bench.store) } throws: { error in
      let error = error as? PipelineError
      return error?.code == .cacheUnavailable && error?.message.contains("damaged") == true
    }
    try bench.sql("CREATE TABLE entries (key TEXT PRIMARY KEY, source TEXT)")
    #expect { _ = try DiskStore(directory: bench.store) } throws: { error in
      (error as? PipelineError)?.code == .cacheUnavailable && "\(error)".contains("size")
    }
    try bench.sql("DROP TABLE entries; CREATE VIEW entries AS SELECT 1 AS key")
    #expect { _ = try DiskStore(directory: bench.store) } throws: { ($0 as? PipelineError)?.code == .cacheUnavailable }
    #expect(bench.canariesSurvive)
  }

  // Opening a FIFO for a blocking read waits for a writer that never comes: the time limit is
  // what fails when an entry is read that way (a bound in seconds would only measure the disk's
  // fsync latency under load).
  @Test(
    "FIFOs, symlinks and folders where entries live are prompt misses, removed without being followed",
    .timeLimit(.minutes(4)))
  func nonRegularEntries() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let store = try DiskStore(directory: bench.store)
    for seed in 1...6 { try await AttackBench.put(store, seed) }
    let path = { (seed: Int) in store.filePath(forKey: AttackBench.key(seed)) }
    for seed in 1...3 {  // three FIFOs: reading any would stall the run
      unlink(path(seed))
      #expect(mkfifo(path(seed), 0o644) == 0)
    }
    unlink(path(4))
    #expect(symlink(bench.work + "/canary", path(4)) == 0)
    unlink(path(5))
    #expect(mkdir(path(5), 0o755) == 0)
    // The two-digit folder of entry 6 becomes a symlink to a folder holding a file of its name.
    let folder6 = (path(6) as NSString).deletingLastPathComponent
    let copy = bench.sibling + "/" + (path(6) as NSString).lastPathComponent
    try FileManager.default.moveItem(atPath: path(6), toPath: copy)
    try FileManager.default.removeItem(atPath: folder6)
    #expect(symlink(bench.sibling, folder6) == 0)

    for seed in 1...6 { #expect(try await AttackBench.get(store, seed) == nil, "entry \(seed)") }
    for seed in 1...5 { #expect(!AttackBench.exists(path(seed)), "entry \(seed) is still there") }
    #expect(store.discardedEntries == 5)
    #expect(try await store.statistics().entries == 0)
    #expect(bench.canariesSurvive && FileManager.default.fileExists(atPath: copy))
    // A write through the symlinked folder replaces the symlink with a real folder.
    try await AttackBench.put(store, 6)
    #expect(try await AttackBench.get(store, 6) != nil)
    #expect(FileManager.default.fileExists(atPath: copy) && (try? Data(contentsOf: URL(fileURLWithPath: copy))) != nil)
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: folder6)) == nil)
  }

  @Test("sweep removes FIFOs and symlinks named like entries without opening or following them; foreign names stay")
  func sweepNonRegular() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let store = try DiskStore(directory: bench.store)
    try await AttackBench.put(store, 1)
    let fifo = store.filePath(forKey: "no-such-key-1")
    let link = store.filePath(forKey: "no-such-key-2")
    for path in [fifo, link] {
      try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    }
    #expect(mkfifo(fifo, 0o644) == 0)
    #expect(symlink(bench.work + "/canary", link) == 0)
    let foreign = (fifo as NSString).deletingLastPathComponent + "/not-an-entry"
    #expect(mkfifo(foreign, 0o644) == 0)
    // A two-digit folder that is a symlink to a folder outside: removed, never listed.
    let used = Set([fifo, link, store.filePath(forKey: AttackBench.key(1))].map { ($0 as NSString).deletingLastPathComponent })
    let folder = try #require(
      ["ee", "ef", "f0", "f1"].map { bench.store + "/entries/" + $0 }.first { !used.contains($0) })
    #expect(symlink(bench.sibling, folder) == 0)
    #expect(try store.sweep() == 2)
    #expect(!AttackBench.exists(fifo) && !AttackBench.exists(link) && !AttackBench.exists(folder))
    #expect(AttackBench.exists(foreign))
    #expect(bench.canariesSurvive)
    #expect(try await AttackBench.get(store, 1) != nil)
  }

  @Test("a symlinked entries folder is never followed: replaced when opening, a miss while open, its target untouched")
  func symlinkedEntriesFolder() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    do {
      let store = try DiskStore(directory: bench.store)
      for seed in 1...3 { try await AttackBench.put(store, seed) }
      // While the store is open, entries/ is moved out and a symlink to it put in its place.
      try FileManager.default.moveItem(atPath: bench.store + "/entries", toPath: bench.sibling + "/entries")
      #expect(symlink(bench.sibling + "/entries", bench.store + "/entries") == 0)
      #expect(try await AttackBench.get(store, 1) == nil)
      try await store.removeEntry(forKey: AttackBench.key(2))
      try await store.removeAll()
      _ = try store.sweep()
      try await AttackBench.put(store, 4)
      #expect(try await AttackBench.get(store, 4) != nil)
    }
    let moved = RegularFiles.files(under: bench.sibling + "/entries")
    #expect(moved.count == 3, "\(moved)")
    // Opening a directory whose entries/ and tmp/ are symlinks replaces them with folders.
    try FileManager.default.removeItem(atPath: bench.store + "/entries")
    #expect(symlink(bench.sibling + "/entries", bench.store + "/entries") == 0)
    try FileManager.default.removeItem(atPath: bench.store + "/tmp")
    try Data([1]).write(to: URL(fileURLWithPath: bench.sibling + "/old.partial"))
    try FileManager.default.setAttributes(
      [.modificationDate: Date(timeIntervalSinceNow: -7200)], ofItemAtPath: bench.sibling + "/old.partial")
    #expect(symlink(bench.sibling, bench.store + "/tmp") == 0)
    let reopened = try DiskStore(directory: bench.store)
    #expect(try await AttackBench.get(reopened, 1) == nil)
    try await AttackBench.put(reopened, 5)
    #expect(try await AttackBench.get(reopened, 5) != nil)
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: bench.store + "/entries")) == nil)
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: bench.store + "/tmp")) == nil)
    #expect(FileManager.default.fileExists(atPath: bench.sibling + "/old.partial"))
    #expect(RegularFiles.files(under: bench.sibling + "/entries") == moved)
    #expect(bench.canariesSurvive)
  }

  @Test("the index's own files as symlinks are removed before SQLite opens them, never followed")
  func symlinkedIndexFiles() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    do {
      let store = try DiskStore(directory: bench.store)
      try await AttackBench.put(store, 1)
    }
    try? FileManager.default.removeItem(atPath: bench.store + "/index.sqlite.lock")
    #expect(symlink(bench.work + "/made-through-lock", bench.store + "/index.sqlite.lock") == 0)
    #expect(symlink(bench.work + "/made-through-wal", bench.store + "/index.sqlite-wal") == 0)
    let store = try DiskStore(directory: bench.store)
    #expect(try await AttackBench.get(store, 1) != nil)
    #expect(!AttackBench.exists(bench.work + "/made-through-lock"))
    #expect(!AttackBench.exists(bench.work + "/made-through-wal"))
    #expect(bench.canariesSurvive)
  }

  @Test(
    "entry files: the header is covered by the checksum, lengths are bounded by maxBytes before allocating, another key's file is corrupt"
  )
  func entryFileChecks() async throws {
    let bench = try AttackBench()
    defer { bench.remove() }
    let store = try DiskStore(directory: bench.store)
    for seed in 1...4 { try await AttackBench.put(store, seed) }
    func patch(_ seed: Int, at offset: Int, _ bytes: [UInt8]) throws {
      let path = store.filePath(forKey: AttackBench.key(seed))
      var data = try Data(contentsOf: URL(fileURLWithPath: path))
      data.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
      try data.write(to: URL(fileURLWithPath: path))
    }
    try patch(1, at: 28, [1])  // the reserved word
    try patch(2, at: 16, [0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])  // payload length near Int.max
    try patch(3, at: 16, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
    for seed in 1...3 { #expect(try await AttackBench.get(store, seed) == nil, "entry \(seed)") }
    #expect(store.discardedEntries == 3)
    // Entry 4's file copied to entry 1's place: another key's file.
    try await AttackBench.put(store, 1)
    try FileManager.default.removeItem(atPath: store.filePath(forKey: AttackBench.key(1)))
    try FileManager.default.copyItem(
      atPath: store.filePath(forKey: AttackBench.key(4)), toPath: store.filePath(forKey: AttackBench.key(1)))
    #expect(try await AttackBench.get(store, 1) == nil)
    #expect(!AttackBench.exists(store.filePath(forKey: AttackBench.key(1))))
    #expect(try await AttackBench.get(store, 4) != nil)

    // A payload larger than the reading store's maxBytes is corrupt, whatever the file says.
    let large = FetchedData(source: ImageSource(path: "big.jpg"), bytes: ImageBytes([UInt8](repeating: 7, count: 300_000)))
    try await store.setEntry(CacheEntry(value: large), forKey: "big", source: "big.jpg")
    let small = try DiskStore(directory: bench.store, maxBytes: 100_000)
    #expect(try await small.entry(forKey: "big") == nil)
    #expect(small.discardedEntries == 1)
  }
}

/// Regular files under a folder, relative and sorted (symlinks are not followed).
enum RegularFiles {
  static func files(under directory: String) -> [String] {
    (FileManager.default.subpaths(atPath: directory) ?? []).filter { path in
      var status = stat()
      return lstat(directory + "/" + path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
    }
    .sorted()
  }
}
