import DarkroomCache
import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

func temporaryDirectory(_ label: String = "cache") throws -> String {
  let path = NSTemporaryDirectory() + "darkroom-\(label)-\(UUID().uuidString)"
  try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return path
}

@Suite("Disk store")
struct DiskStoreTests {
  func image(_ seed: Int, size: Int = 4096) -> EncodedImage {
    let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &* 7) }
    return EncodedImage(
      source: ImageSource(path: "/img/\(seed).jpg"), bytes: ImageBytes(bytes), format: .jpeg, width: seed, height: 10)
  }

  func key(_ seed: Int, prefix: String = "") -> String {
    CacheKey.make(prefix: prefix, source: ImageSource(path: "/img/\(seed).jpg").identity, upstream: ["fetch", "encode"])
  }

  func put(_ store: DiskStore, _ seed: Int, prefix: String = "", entry: ((EncodedImage) -> CacheEntry)? = nil) async throws {
    let value = image(seed)
    try await store.setEntry(
      entry?(value) ?? CacheEntry(value: value, storedAt: store.now), forKey: key(seed, prefix: prefix),
      source: ImageSource(path: "/img/\(seed).jpg").identity)
  }

  func get(_ store: DiskStore, _ seed: Int, prefix: String = "") async throws -> EncodedImage? {
    try await store.entry(forKey: key(seed, prefix: prefix))?.value as? EncodedImage
  }

  @Test("entries round-trip byte for byte and survive reopening the directory")
  func roundTripAndRestart() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    do {
      let store = try DiskStore(directory: directory)
      try await put(store, 1)
      let fetched = FetchedData(
        source: ImageSource("https://example.com/a.png"), bytes: ImageBytes([1, 2, 3]), contentType: "image/png",
        metadata: ["etag": "\"x\""])
      try await store.setEntry(CacheEntry(value: fetched), forKey: "k-fetched", source: fetched.source.identity)
    }
    let reopened = try DiskStore(directory: directory)
    let back = try #require(try await get(reopened, 1))
    #expect(back.bytes == image(1).bytes && back.width == 1 && back.format == .jpeg)
    #expect(back.source == ImageSource(path: "/img/1.jpg"))
    let fetched = try #require(try await reopened.entry(forKey: "k-fetched")?.value as? FetchedData)
    #expect(fetched.bytes == ImageBytes([1, 2, 3]) && fetched.contentType == "image/png" && fetched.etag == "\"x\"")
    #expect(try await reopened.statistics().entries == 2)
  }

  @Test("least recently used entries go first when the byte or count bound is passed")
  func lruBounds() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let clock = ManualClock()
    let store = try DiskStore(directory: directory, maxBytes: 1 << 30, maxCount: 3, pool: nil, now: { clock.now })
    for seed in 1...3 {
      try await put(store, seed)
      clock.advance(1)
    }
    _ = try await get(store, 1)  // 1 becomes the most recently used
    clock.advance(1)
    try await put(store, 4)
    #expect(try await get(store, 2) == nil)
    for seed in [1, 3, 4] { #expect(try await get(store, seed) != nil) }

    let small = try DiskStore(directory: directory + "-small", maxBytes: 3 * 4200, pool: nil, now: { clock.now })
    defer { try? FileManager.default.removeItem(atPath: directory + "-small") }
    for seed in 1...5 {
      try await put(small, seed)
      clock.advance(1)
    }
    let stats = try await small.statistics()
    #expect(stats.entries == 2 && stats.bytes <= 3 * 4200)
    #expect(try await get(small, 5) != nil)
    #expect(try await get(small, 1) == nil)
    let files = try FileManager.default.subpathsOfDirectory(atPath: directory + "-small/entries").filter { $0.contains("/") }
    #expect(files.count == 2)
  }

  @Test("closing a store writes its hits' access times: another process then evicts the entry not hit")
  func closeWritesAccessTimes() async throws {
    for closes in [true, false] {
      let directory = try temporaryDirectory()
      defer { try? FileManager.default.removeItem(atPath: directory) }
      let clock = ManualClock()
      // The first store stays open, as a process keeps its one store per directory to the end.
      let first = try DiskStore(directory: directory, maxBytes: 1 << 30, maxCount: 2, pool: nil, now: { clock.now })
      for seed in 1...2 {
        try await put(first, seed)
        clock.advance(1)
      }
      _ = try await get(first, 1)  // kept in the store's batch of access times
      clock.advance(1)
      if closes { await first.close() }
      // Another process's store sees only what the index holds.
      let other = try DiskStore(directory: directory, maxBytes: 1 << 30, maxCount: 2, pool: nil, now: { clock.now })
      try await put(other, 3)
      let evicted = closes ? 2 : 1
      #expect(try await get(other, evicted) == nil)
      #expect(try await get(other, 3 - evicted) != nil)
      withExtendedLifetime(first) {}
    }
  }

  @Test("expired entries without validators are dropped; stale ones with validators are kept for revalidation")
  func ttl() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let clock = ManualClock()
    let store = try DiskStore(directory: directory, pool: nil, now: { clock.now })
    try await put(store, 1) { CacheEntry(value: $0, storedAt: clock.now, expiresAt: clock.now + 60) }
    try await put(store, 2) {
      CacheEntry(value: $0, storedAt: clock.now, expiresAt: clock.now + 60, validators: CacheValidators(etag: "\"v2\""))
    }
    clock.advance(30)
    #expect(try await store.entry(forKey: key(1))?.isFresh(at: clock.now) == true)
    clock.advance(31)
    #expect(try await store.entry(forKey: key(1)) == nil)
    let stale = try #require(try await store.entry(forKey: key(2)))
    #expect(!stale.isFresh(at: clock.now) && stale.validators.etag == "\"v2\"")
    try await store.refresh(key: key(2), expiresAt: clock.now + 60, validators: stale.validators)
    #expect(try await store.entry(forKey: key(2))?.isFresh(at: clock.now) == true)
    #expect(try await store.statistics().entries == 1)
  }

  @Test("a corrupted or torn entry file is a miss, never bad bytes, and is removed")
  func corruption() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try DiskStore(directory: directory)
    try await put(store, 1)
    try await put(store, 2)
    let first = store.filePath(forKey: key(1))
    var bytes = try Data(contentsOf: URL(fileURLWithPath: first))
    bytes[bytes.count - 100] ^= 0x40
    try bytes.write(to: URL(fileURLWithPath: first))
    let second = store.filePath(forKey: key(2))
    let whole = try Data(contentsOf: URL(fileURLWithPath: second))
    try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: second))
    #expect(try await get(store, 1) == nil)
    #expect(try await get(store, 2) == nil)
    #expect(store.discardedEntries == 2)
    #expect(!FileManager.default.fileExists(atPath: first) && !FileManager.default.fileExists(atPath: second))
    #expect(try await store.statistics().entries == 0)
  }

  @Test("purge by source removes every variant of one source, through the index")
  func purge() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try DiskStore(directory: directory)
    for prefix in ["a", "b", "c"] {
      try await put(store, 1, prefix: prefix)
      try await put(store, 2, prefix: prefix)
    }
    #expect(try await store.purge(source: ImageSource("file:///img/1.jpg")) == 3)
    #expect(try await get(store, 1, prefix: "a") == nil)
    #expect(try await get(store, 2, prefix: "b") != nil)
    #expect(try await store.statistics().entries == 3)
    try await store.removeAll()
    #expect(try await store.statistics().entries == 0)
  }

  @Test("sweep removes files the index does not know (a process killed before committing)")
  func sweep() async throws {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try DiskStore(directory: directory)
    try await put(store, 1)
    // An entry file of a key the index does not know (its row was never committed).
    let orphan = store.filePath(forKey: "never-committed")
    try FileManager.default.createDirectory(
      atPath: (orphan as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data([1, 2, 3]).write(to: URL(fileURLWithPath: orphan))
    // A file the store could not have made: not its to remove.
    try FileManager.default.createDirectory(atPath: directory + "/entries/zz", withIntermediateDirectories: true)
    try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory + "/entries/zz/orphan"))
    try Data([4]).write(to: URL(fileURLWithPath: directory + "/tmp/dead.partial"))
    #expect(try store.sweep() == 2)
    #expect(try await get(store, 1) != nil)
    #expect(!FileManager.default.fileExists(atPath: orphan))
    #expect(FileManager.default.fileExists(atPath: directory + "/entries/zz/orphan"))
  }

  @Test("an unwritable directory is a clear cacheUnavailable error")
  func unwritable() throws {
    #expect {
      _ = try DiskStore(directory: "/proc/darkroom-cache")
    } throws: { error in
      (error as? PipelineError)?.code == .cacheUnavailable
    }
  }
}

@Suite("Disk store threads", .timeLimit(.minutes(3)))
struct DiskStoreThreadTests {
  /// The disk stores' own threads in this process (Linux: /proc/self/task, by name: the kernel
  /// keeps 15 bytes of "darkroom.disk-cache.N"). Counting every thread of the process made the
  /// test wait forever whenever a test beside it started threads that stay (a deadline
  /// scheduler's, an event loop's), spinning on one of the two cooperative threads meanwhile.
  static var threadCount: Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter { task in
      let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
      return name.hasPrefix("darkroom.disk-c")
    }.count
  }

  @Test("a store's own threads end with it: opening and dropping 30 stores leaves no threads behind")
  func storesReleaseThreads() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-threads-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // One store first, so that the process-wide threads (SQLite, the cooperative pool) exist.
    do { _ = try await DiskStore(directory: directory).statistics() }
    let baseline = Self.threadCount
    for round in 0..<30 {
      let store = try DiskStore(directory: directory)
      let value = FetchedData(source: ImageSource(path: "t.jpg"), bytes: ImageBytes([0xFF, 0xD8, 0xFF, 0xD9]))
      try await store.setEntry(CacheEntry(value: value), forKey: "k\(round)", source: "t.jpg")
      #expect(try await store.entry(forKey: "k\(round)") != nil)
      if round == 0 { #expect(Self.threadCount >= 2, "the store's threads are counted by their name") }
    }
    // 30 stores × 2 threads would be 60 more; they exit once their stores are gone.
    while Self.threadCount > baseline + 4 { await Task.yield() }
    #expect(Self.threadCount <= baseline + 4)
  }
}
