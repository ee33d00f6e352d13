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
/// Blocking file and database work runs on the store's own `BlockingPool`.
///
/// ```swift
/// let store = try DiskStore.open(directory: "/var/cache/darkroom", maxBytes: 2 << 30)
/// let pipeline = Pipeline(name: "thumb") {
///   Fetcher(); ImageDecoder(); Resizer(width: 256); ImageEncoder(.webp()); Cache<EncodedImage>(store: store)
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
  /// The store directory, open for the store's lifetime: every entry file is reached beneath it.
  let folder: DiskStoreFolder
  private let pool: BlockingPool
  /// True when the store made its pool (then its threads end with the store).
  private let ownsPool: Bool
  private let clock: @Sendable () -> Date
  private let accesses = AccessLog()
  private let discarded = Counter()

  /// Opens (creating if needed) a store. Prefer ``open(directory:maxBytes:maxCount:)``, which
  /// shares one instance per directory in a process.
  public convenience init(directory: String, maxBytes: Int = 1 << 30, maxCount: Int = 100_000) throws {
    try self.init(directory: directory, maxBytes: maxBytes, maxCount: maxCount, pool: nil)
  }

  /// A store whose work runs on `pool` (its own threads when `nil`) and that reads the time from
  /// `now`.
  package init(
    directory: String, maxBytes: Int = 1 << 30, maxCount: Int = 100_000, pool: BlockingPool?,
    now: @escaping @Sendable () -> Date = { Date() }
  ) throws {
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
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
      folder = try DiskStoreFolder(path: self.directory)
    } catch let error as PipelineError {
      throw PipelineError(.cacheUnavailable, error.message, cause: error)
    }
    do {
      index = try DiskIndex(path: self.directory + "/index.sqlite")
    } catch let error as PipelineError where error.code == .cacheUnavailable {
      throw error
    } catch {
      throw PipelineError(.cacheUnavailable, "cannot open the disk cache index in \(directory): \(error)", cause: error)
    }
    self.pool = pool ?? BlockingPool(threads: 2, name: "darkroom.disk-cache")
    ownsPool = pool == nil
    clock = now
    _ = folder.removeTemporaries(olderThan: 3600)
  }

  deinit {
    try? index.touch(accesses.drain())
    // The store's own threads exit with it (a pool passed in belongs to the caller).
    if ownsPool { pool.shutdown() }
  }

  public var now: Date { clock() }
  public var keeps: String { Self.keepsDescription }
  public static let keepsDescription = "fetched bytes (after fetch) and encoded images (after encode)"
  public func accepts(_ type: Any.Type) -> Bool { Self.accepts(type) }
  /// Whether disk stores can keep values of `type` (a `CacheSerializable` type).
  public static func accepts(_ type: Any.Type) -> Bool { type is any CacheSerializable.Type }

  /// Entries found corrupt or torn (and removed) since the store was opened: entry files that
  /// fail their checks, non-regular files where entries belong, and index rows that do not decode.
  public var discardedEntries: Int { discarded.value }

  public func entry(forKey key: String) async throws -> CacheEntry? {
    try await pool.run { try self.indexed { try self.readEntry(forKey: key) } }
  }

  /// What reading an entry found.
  private enum Read {
    case missing
    case corrupt
    case value(type: String, record: CacheRecord)
  }

  private func readEntry(forKey key: String) throws -> CacheEntry? {
    let row: DiskIndex.Row
    switch try index.lookup(key) {
    case .absent: return nil
    case .corrupt:
      discardIfStillBad(key: key)
      return nil
    case .found(let found): row = found
    }
    let now = clock()
    let entryShell = CacheEntry(value: 0, expiresAt: row.expiresAt, validators: row.validators)
    guard entryShell.isWorthKeeping(at: now) else {
      try removeEntries(keys: [key])
      return nil
    }
    let name = DiskStoreFolder.EntryName(key: key)
    guard case .value(let tag, let record) = try readFile(name, key: key) else {
      discardIfStillBad(key: key)
      return nil
    }
    guard let type = CacheSerializableTypes.shared.type(for: tag) else { return nil }  // another program's type
    let source = ImageSource(cacheIdentity: String(CacheKey.sourceIdentity(of: key) ?? ""))
    let value: any CacheSerializable
    do {
      value = try type.init(cacheRecord: record, source: source)
    } catch let error as PipelineError where error.code == .cacheCorrupt {
      discardIfStillBad(key: key)
      return nil
    }
    if let batch = accesses.record(key, at: now) { try? index.touch(batch) }
    return CacheEntry(value: value, expiresAt: row.expiresAt, validators: row.validators)
  }

  /// Reads the entry file of `key` through the store's descriptors: missing, corrupt (it fails a
  /// check, or is no regular file) or its value's parts.
  private func readFile(_ name: DiskStoreFolder.EntryName, key: String) throws -> Read {
    let descriptor: Int32
    let size: Int
    switch try folder.openEntry(name) {
    case .missing: return .missing
    case .notRegular: return .corrupt
    case .file(let opened, let count): (descriptor, size) = (opened, count)
    }
    defer { Glibc.close(descriptor) }
    do {
      let found = try DiskEntryFile.read(
        descriptor: descriptor, fileSize: size, key: key, maxPayloadBytes: maxBytes, path: directory + "/" + name.relativePath)
      return .value(type: found.type, record: found.record)
    } catch let error as PipelineError where error.code == .cacheCorrupt {
      return .corrupt
    }
  }

  public func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {
    guard let value = entry.value as? any CacheSerializable else {
      throw PipelineError(.cacheFailed, "the disk store cannot keep \(valueDescription(of: type(of: entry.value)))")
    }
    let record = value.cacheRecord()
    let tag = type(of: value).cacheTypeTag
    try await pool.run { try self.indexed { try self.write(entry, record: record, tag: tag, key: key, source: source) } }
  }

  private func write(_ entry: CacheEntry, record: CacheRecord, tag: String, key: String, source: String) throws {
    let name = DiskStoreFolder.EntryName(key: key)
    let temporary = try folder.createTemporary()
    let size: Int
    do {
      defer { Glibc.close(temporary.descriptor) }
      size = try DiskEntryFile.write(
        to: temporary.descriptor, path: directory + "/tmp/" + temporary.name, key: key, record: record, type: tag)
    } catch {
      folder.removeTemporary(temporary.name)  // a disk that filled up mid-write leaves no partial file
      throw error
    }
    let pendingAccesses = accesses.drain()
    do {
      try index.write { db in
        try folder.install(temporary: temporary.name, as: name)
        try DiskIndex.upsert(
          db, key: key, source: source, file: name.relativePath, size: size, type: tag, entry: entry, now: clock())
        for (accessed, date) in pendingAccesses {
          try db.execute(
            sql: "UPDATE entries SET accessedAt = MAX(accessedAt, ?) WHERE key = ?",
            arguments: [date.timeIntervalSince1970, accessed])
        }
        let victims = try DiskIndex.evictionVictims(db, maxBytes: maxBytes, maxCount: maxCount)
        try DiskIndex.delete(db, storedKeys: victims.map(\.storedKey))
        for victim in victims { if let key = victim.key { folder.removeEntry(DiskStoreFolder.EntryName(key: key)) } }
      }
    } catch {
      folder.removeTemporary(temporary.name)
      throw error
    }
  }

  public func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {
    try await pool.run {
      try self.indexed {
        try self.index.write { db in
          try db.execute(
            sql: "UPDATE entries SET expiresAt = ?, etag = ?, lastModified = ?, accessedAt = ? WHERE key = ?",
            arguments: [
              expiresAt?.timeIntervalSince1970, validators.etag, validators.lastModified, self.clock().timeIntervalSince1970,
              key,
            ])
        }
      }
    }
  }

  public func removeEntry(forKey key: String) async throws {
    try await pool.run { try self.indexed { try self.removeEntries(keys: [key]) } }
  }

  /// Removes every entry the index knows (each file named by its key; rows whose key is not text
  /// are deleted with no file).
  public func removeAll() async throws {
    try await pool.run {
      try self.indexed {
        try self.index.write { db in
          for key in try DiskIndex.storedKeys(db).compactMap({ IndexValue.text($0) }) {
            self.folder.removeEntry(DiskStoreFolder.EntryName(key: key))
          }
          try db.execute(sql: "DELETE FROM entries")
        }
      }
    }
  }

  public func purge(source: ImageSource) async throws -> Int {
    try await pool.run {
      try self.indexed {
        try self.index.write { db in
          let keys = try DiskIndex.storedKeys(db, source: source.identity)
          for key in keys.compactMap({ IndexValue.text($0) }) { self.folder.removeEntry(DiskStoreFolder.EntryName(key: key)) }
          try db.execute(sql: "DELETE FROM entries WHERE source = ?", arguments: [source.identity])
          return keys.count
        }
      }
    }
  }

  public func statistics() async throws -> CacheStatistics {
    let totals = try await pool.run { try self.indexed { try self.index.totals() } }
    return CacheStatistics(
      store: name, entries: totals.entries, bytes: totals.bytes, byteLimit: maxBytes, countLimit: maxCount, location: directory)
  }

  /// Writes pending access times to the index (hits record them in batches).
  public func flush() throws { try indexed { try index.touch(accesses.drain()) } }

  /// Writes pending access times (on the store's threads): the process keeps its one store per
  /// directory to the end, so its deinit, which writes them too, never runs. The store stays
  /// usable. When another process holds the index's write lock the times are dropped at once:
  /// waiting for it (up to 30 s) held up the end of a run.
  ///
  /// The index's log is not checkpointed here: a process that opens the index alone reads the log
  /// back (at most SQLite's 4 MB checkpoint size, a few milliseconds), while truncating it at the
  /// end of every run syncs the disk and waited on the run's own writes (case A's cached rerun:
  /// 48 → 64 ms).
  public func close() async {
    _ = try? await pool.run { [self] in try indexed { try index.touch(accesses.drain(), waitingForLock: false) } }
  }

  /// Removes what a killed process or a damaged index left: entry files the index does not know,
  /// temporary files, and index rows that do not decode (with their entry files). Only names the
  /// store could have made are removed (64 lowercase hex digits in the folder of their first two,
  /// `*.partial` in `tmp`); anything else in the directory is left alone. Returns how many files
  /// went. Blocks: from async code, prefer ``removeStrayFiles()``.
  ///
  /// ```swift
  /// let removed = try DiskStore.open(directory: "/var/cache/darkroom").sweep()
  /// ```
  @discardableResult
  public func sweep() throws -> Int {
    try indexed {
      try index.write { db in
        let corrupt = try DiskIndex.corruptRows(db)
        try DiskIndex.delete(db, storedKeys: corrupt.map(\.storedKey))
        let known = Set(try DiskIndex.storedKeys(db).compactMap { IndexValue.text($0) }.map(DiskStoreFolder.EntryName.init(key:)))
        let removed = folder.removeEntries { !known.contains($0) }
        return removed + folder.removeTemporaries(olderThan: 0)
      }
    }
  }

  /// ``sweep()`` on the store's own threads.
  ///
  /// ```swift
  /// print("\(try await store.removeStrayFiles()) stray files removed")
  /// ```
  @discardableResult
  public func removeStrayFiles() async throws -> Int { try await pool.run { try self.sweep() } }

  private func removeEntries(keys: [String]) throws {
    try index.write { db in
      for key in keys { folder.removeEntry(DiskStoreFolder.EntryName(key: key)) }
      try DiskIndex.delete(db, keys: keys)
    }
  }

  /// Removes a corrupt entry (a row that does not decode, a file that fails its checks or is not
  /// a regular file, or a row whose file is gone) — after checking again under the write lock,
  /// since another process may have replaced it meanwhile. Only a corrupt one is counted.
  private func discardIfStillBad(key: String) {
    _ = try? index.write { db in
      let name = DiskStoreFolder.EntryName(key: key)
      var corrupt = false
      switch try DiskIndex.lookup(db, key) {
      case .absent: return
      case .corrupt: corrupt = true
      case .found:
        switch try readFile(name, key: key) {
        case .missing: break
        case .corrupt: corrupt = true
        case .value(let tag, let record):
          guard let type = CacheSerializableTypes.shared.type(for: tag) else { return }
          let source = ImageSource(cacheIdentity: String(CacheKey.sourceIdentity(of: key) ?? ""))
          guard (try? type.init(cacheRecord: record, source: source)) == nil else { return }  // replaced meanwhile
          corrupt = true
        }
      }
      folder.removeEntry(name)
      try DiskIndex.delete(db, keys: [key])
      if corrupt { discarded.increment() }
    }
  }

  /// Runs `body`, turning an SQLite failure (a damaged or tampered index) into `cacheFailed`.
  private func indexed<T>(_ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch let error as PipelineError {
      throw error
    } catch {
      throw PipelineError(
        .cacheFailed, "the disk cache index in \(directory) failed (it may be damaged; delete index.sqlite): \(error)",
        cause: error)
    }
  }

  /// The file an entry for `key` lives in (whether or not it exists).
  public func filePath(forKey key: String) -> String { directory + "/" + Self.relativePath(for: key) }

  static func relativePath(for key: String) -> String { DiskStoreFolder.EntryName(key: key).relativePath }
}
