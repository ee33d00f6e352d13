import Crypto
import DarkroomCore
import Foundation
import GRDB

#if canImport(Glibc)
  import Glibc
#endif

/// A cache store in a directory, shared safely by several processes.
///
/// Each entry is one file (`entries/ab/<sha256 of key>`) written atomically — a temporary file,
/// `fsync`, `rename` — and verified by a CRC-32 on every read, so a torn or corrupted entry is a
/// miss, never bad bytes. An SQLite index (GRDB, WAL mode) keeps sizes, access times, expiry,
/// validators and sources: it bounds the directory by bytes and count (least recently used go
/// first), survives restarts, and lets ``purge(source:)`` find every variant of a source.
/// Blocking file and database work runs on the store's own ``BlockingPool``.
///
/// ```swift
/// let store = try DiskStore.open(directory: "/var/cache/darkroom", maxBytes: 2 << 30)
/// let pipeline = Pipeline(name: "thumb") {
///   Fetcher(); Decoder(); Resizer(width: 256); Encoder(.webp()); Cache<EncodedImage>(store: store)
/// }
/// ```
public final class DiskStore: CacheStore {
  public let name = "disk"
  /// The directory, resolved.
  public let directory: String
  /// The most bytes of entries kept (default 1 GiB).
  public let maxBytes: Int
  /// The most entries kept (default 100,000).
  public let maxCount: Int
  let index: DiskIndex
  private let pool: BlockingPool
  /// True when the store made its pool (then its threads end with the store).
  private let ownsPool: Bool
  private let clock: @Sendable () -> Date
  private let accesses = AccessLog()
  private let discarded = Counter()

  /// Opens (creating if needed) a store. Prefer ``open(directory:maxBytes:maxCount:)``, which
  /// shares one instance per directory in a process.
  public init(
    directory: String, maxBytes: Int = 1 << 30, maxCount: Int = 100_000, pool: BlockingPool? = nil,
    now: @escaping @Sendable () -> Date = { Date() }
  ) throws {
    let fileManager = FileManager.default
    do {
      for sub in ["", "entries", "tmp"] {
        try fileManager.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true)
      }
    } catch {
      throw PipelineError(
        .cacheUnavailable, "cannot create the disk cache directory \(directory): \(error.localizedDescription)", cause: error)
    }
    guard access(directory, W_OK) == 0 else {
      throw PipelineError(.cacheUnavailable, "the disk cache directory \(directory) is not writable; give a writable directory")
    }
    self.directory = URL(fileURLWithPath: directory).standardizedFileURL.path
    self.maxBytes = max(0, maxBytes)
    self.maxCount = max(0, maxCount)
    do {
      index = try DiskIndex(path: self.directory + "/index.sqlite")
    } catch {
      throw PipelineError(.cacheUnavailable, "cannot open the disk cache index in \(directory): \(error)", cause: error)
    }
    self.pool = pool ?? BlockingPool(threads: 2, name: "darkroom.disk-cache")
    ownsPool = pool == nil
    clock = now
    removeStaleTemporaries()
  }

  deinit {
    try? index.touch(accesses.drain())
    // The store's own threads exit with it (a pool passed in belongs to the caller).
    if ownsPool { pool.shutdown() }
  }

  public var now: Date { clock() }
  public var keeps: String { Self.keepsDescription }
  public static let keepsDescription = "fetched bytes (after fetch) and encoded images (after encode)"
  public func accepts(_ type: Any.Type) -> Bool { type is any CacheSerializable.Type }

  /// Entries found corrupt or torn (and removed) since the store was opened.
  public var discardedEntries: Int { discarded.value }

  public func entry(forKey key: String) async throws -> CacheEntry? {
    try await pool.run { try self.readEntry(forKey: key) }
  }

  private func readEntry(forKey key: String) throws -> CacheEntry? {
    guard let row = try index.row(forKey: key) else { return nil }
    let now = clock()
    let entryShell = CacheEntry(value: 0, expiresAt: row.expiresAt, validators: row.validators)
    guard entryShell.isWorthKeeping(at: now) else {
      try removeEntries(keys: [key])
      return nil
    }
    let found: (type: String, record: CacheRecord)?
    do {
      found = try DiskEntryFile.read(path: directory + "/" + row.file, key: key)
    } catch let error as PipelineError where error.code == .cacheCorrupt {
      discardIfStillBad(key: key, file: row.file)
      return nil
    }
    guard let found, let type = CacheSerializableTypes.shared.type(for: found.type) else { return nil }
    let source = ImageSource(cacheIdentity: String(CacheKey.sourceIdentity(of: key) ?? ""))
    let value = try type.init(cacheRecord: found.record, source: source)
    if let batch = accesses.record(key, at: now) { try? index.touch(batch) }
    return CacheEntry(value: value, expiresAt: row.expiresAt, validators: row.validators)
  }

  public func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {
    guard let value = entry.value as? any CacheSerializable else {
      throw PipelineError(.cacheFailed, "the disk store cannot keep \(valueDescription(of: type(of: entry.value)))")
    }
    let record = value.cacheRecord()
    let tag = type(of: value).cacheTypeTag
    try await pool.run { try self.write(entry, record: record, tag: tag, key: key, source: source) }
  }

  private func write(_ entry: CacheEntry, record: CacheRecord, tag: String, key: String, source: String) throws {
    let relative = Self.relativePath(for: key)
    let temporary = directory + "/tmp/" + UUID().uuidString + ".partial"
    let size = try DiskEntryFile.write(to: temporary, key: key, record: record, type: tag)
    let final = directory + "/" + relative
    let subdirectory = (final as NSString).deletingLastPathComponent
    let pendingAccesses = accesses.drain()
    do {
      try index.write { db in
        if mkdir(subdirectory, 0o755) != 0 && errno != EEXIST { throw DiskEntryFile.failure("cannot create \(subdirectory)") }
        guard rename(temporary, final) == 0 else { throw DiskEntryFile.failure("cannot move an entry into \(subdirectory)") }
        Self.syncDirectory(subdirectory)
        try DiskIndex.upsert(db, key: key, source: source, file: relative, size: size, type: tag, entry: entry, now: clock())
        for (accessed, date) in pendingAccesses {
          try db.execute(
            sql: "UPDATE entries SET accessedAt = MAX(accessedAt, ?) WHERE key = ?",
            arguments: [date.timeIntervalSince1970, accessed])
        }
        let victims = try DiskIndex.evictionVictims(db, maxBytes: maxBytes, maxCount: maxCount)
        try DiskIndex.delete(db, keys: victims.map(\.key))
        for victim in victims { unlink(directory + "/" + victim.file) }
      }
    } catch {
      unlink(temporary)
      throw error as? PipelineError ?? PipelineError(.cacheFailed, "cannot update the disk cache index: \(error)", cause: error)
    }
  }

  public func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {
    try await pool.run {
      try self.index.write { db in
        try db.execute(
          sql: "UPDATE entries SET expiresAt = ?, etag = ?, lastModified = ?, accessedAt = ? WHERE key = ?",
          arguments: [
            expiresAt?.timeIntervalSince1970, validators.etag, validators.lastModified, self.clock().timeIntervalSince1970, key,
          ])
      }
    }
  }

  public func removeEntry(forKey key: String) async throws {
    try await pool.run { try self.removeEntries(keys: [key]) }
  }

  public func removeAll() async throws {
    try await pool.run {
      try self.index.write { db in
        for file in try String.fetchAll(db, sql: "SELECT file FROM entries") { unlink(self.directory + "/" + file) }
        try db.execute(sql: "DELETE FROM entries")
      }
    }
  }

  public func purge(source: ImageSource) async throws -> Int {
    try await pool.run {
      try self.index.write { db in
        let rows = try GRDB.Row.fetchAll(db, sql: "SELECT key, file FROM entries WHERE source = ?", arguments: [source.identity])
        for row in rows { unlink(self.directory + "/" + (row["file"] as String)) }
        try db.execute(sql: "DELETE FROM entries WHERE source = ?", arguments: [source.identity])
        return rows.count
      }
    }
  }

  public func statistics() async throws -> CacheStatistics {
    let totals = try await pool.run { try self.index.totals() }
    return CacheStatistics(
      store: name, entries: totals.entries, bytes: totals.bytes, byteLimit: maxBytes, countLimit: maxCount, location: directory)
  }

  /// Writes pending access times to the index (hits record them in batches).
  public func flush() throws { try index.touch(accesses.drain()) }

  /// Removes entry files the index does not know (left by a process killed between writing and
  /// committing) and temporary files; returns how many went.
  @discardableResult
  public func sweep() throws -> Int {
    try index.write { _ in
      let known = try self.index.files()
      var removed = 0
      let root = directory + "/entries"
      for sub in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + sub)) ?? []
        where !known.contains("entries/\(sub)/\(name)") {
          if unlink(root + "/" + sub + "/" + name) == 0 { removed += 1 }
        }
      }
      return removed + removeStaleTemporaries(olderThan: 0)
    }
  }

  private func removeEntries(keys: [String]) throws {
    try index.write { db in
      for key in keys {
        if let file = try String.fetchOne(db, sql: "SELECT file FROM entries WHERE key = ?", arguments: [key]) {
          unlink(directory + "/" + file)
        }
      }
      try DiskIndex.delete(db, keys: keys)
    }
  }

  /// Removes a corrupt entry — after checking again under the write lock, since another process
  /// may have replaced it meanwhile.
  private func discardIfStillBad(key: String, file: String) {
    _ = try? index.write { db in
      let path = directory + "/" + file
      if (try? DiskEntryFile.read(path: path, key: key)) == nil {
        unlink(path)
        try DiskIndex.delete(db, keys: [key])
        discarded.increment()
      }
    }
  }

  @discardableResult
  private func removeStaleTemporaries(olderThan age: TimeInterval = 3600) -> Int {
    let tmp = directory + "/tmp"
    var removed = 0
    for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] {
      let path = tmp + "/" + name
      let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? Date()
      if Date().timeIntervalSince(modified) >= age, unlink(path) == 0 { removed += 1 }
    }
    return removed
  }

  /// The file an entry for `key` lives in (whether or not it exists).
  public func filePath(forKey key: String) -> String { directory + "/" + Self.relativePath(for: key) }

  static func relativePath(for key: String) -> String {
    let digest = SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
    return "entries/\(digest.prefix(2))/\(digest)"
  }

  private static func syncDirectory(_ path: String) {
    let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    fsync(descriptor)
    close(descriptor)
  }
}
