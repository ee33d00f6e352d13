import DarkroomCore
import Foundation
import GRDB

#if canImport(Glibc)
  import Glibc
#endif

/// The disk store's index: an SQLite database (through GRDB) in WAL mode, shared by every process
/// using the directory. One row per entry: its key, source, size, type, times and validators (and
/// a `file` column, written for older versions and never read: entry files are named by keys).
///
/// Nothing in a row is trusted: values are decoded through ``IndexValue`` and a row that does not
/// decode is corrupt (a miss, removed); see ``Row``.
///
/// Writers take an immediate transaction, so processes serialise their inserts, replacements and
/// evictions; readers never block. See Docs/Decisions/0008-disk-cache-index.md for why SQLite.
final class DiskIndex: Sendable {
  let database: DatabasePool
  let path: String

  /// How long a statement waits for another connection's write lock.
  static let busyMilliseconds = 30_000

  /// The columns the store needs in `entries`.
  static let requiredColumns: Set<String> = [
    "key", "source", "file", "size", "type", "storedAt", "expiresAt", "accessedAt", "etag", "lastModified",
  ]

  init(path: String) throws {
    self.path = path
    var configuration = Configuration()
    configuration.busyMode = .timeout(Double(Self.busyMilliseconds) / 1000)
    configuration.label = "darkroom.disk-cache"
    configuration.prepareDatabase { db in
      try db.execute(sql: "PRAGMA synchronous = NORMAL")
      // A tampered schema (views, triggers) runs no function with side effects; damaged pages are
      // found before they are used.
      try db.execute(sql: "PRAGMA trusted_schema = OFF")
      try db.execute(sql: "PRAGMA cell_size_check = ON")
    }
    // The index's files are the store's own: a symlink, FIFO or folder in their place is removed
    // (never followed) before SQLite opens them.
    for suffix in ["", "-wal", "-shm", "-journal", ".lock"] { Self.removeIfNotRegular(path + suffix) }
    // Switching a new database to WAL fails at once (SQLITE_BUSY, no busy handler) when another
    // process does the same: opening is serialised across processes by a lock file.
    let lock = Glibc.open(path + ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
    guard lock >= 0 else { throw DiskEntryFile.failure("cannot create \(path).lock") }
    defer { close(lock) }
    while flock(lock, LOCK_EX) != 0 && errno == EINTR {}
    defer { flock(lock, LOCK_UN) }
    database = try DatabasePool(path: path, configuration: configuration)
    // Several processes may open a new directory at once: the schema is created in an immediate
    // transaction with IF NOT EXISTS, so they serialise instead of racing a migration.
    let version = try database.read { db in
      try DatabaseValue.fetchOne(db, sql: "PRAGMA user_version").flatMap { IndexValue.integer($0, in: 0...Int64.max) } ?? 0
    }
    if version < 1 {
      try write { db in
        try db.execute(
          sql: """
            CREATE TABLE IF NOT EXISTS entries (
              key TEXT PRIMARY KEY NOT NULL, source TEXT NOT NULL, file TEXT NOT NULL, size INTEGER NOT NULL,
              type TEXT NOT NULL, storedAt REAL NOT NULL, expiresAt REAL, accessedAt REAL NOT NULL,
              etag TEXT, lastModified TEXT);
            CREATE INDEX IF NOT EXISTS entries_source ON entries(source);
            CREATE INDEX IF NOT EXISTS entries_accessed ON entries(accessedAt);
            PRAGMA user_version = 1;
            """)
      }
    }
    try checkSchema()
  }

  /// Fails with `cacheUnavailable` when `entries` is missing, not a table, or lacks a column.
  private func checkSchema() throws {
    let (kind, columns) = try database.read { db in
      let kind = try DatabaseValue.fetchOne(db, sql: "SELECT type FROM sqlite_master WHERE name = 'entries'")
      let columns = try DatabaseValue.fetchAll(db, sql: "SELECT name FROM pragma_table_info('entries')")
      return (kind.flatMap { IndexValue.text($0) }, Set(columns.compactMap { IndexValue.text($0) }))
    }
    let missing = Self.requiredColumns.subtracting(columns)
    guard kind == "table", missing.isEmpty else {
      let what =
        kind == nil
        ? "has no entries table"
        : kind != "table"
          ? "has an entries \(kind ?? "") instead of a table"
          : "lacks the columns \(missing.sorted().joined(separator: ", "))"
      throw PipelineError(
        .cacheUnavailable, "the disk cache index \(path) is damaged (it \(what)); delete it to start afresh")
    }
  }

  private static func removeIfNotRegular(_ path: String) {
    var status = stat()
    guard lstat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG else { return }
    if unlink(path) != 0 && errno == EISDIR { rmdir(path) }
  }

  /// The row for `key`: absent, corrupt (it does not decode) or found. One statement, so
  /// SQLite's own read transaction around it is enough: GRDB's (`BEGIN`, `COMMIT`) would triple
  /// the statements of every hit.
  func lookup(_ key: String) throws -> Lookup { try database.unsafeRead { db in try Self.lookup(db, key) } }

  /// ``lookup(_:)`` on a connection already in use (under the write lock).
  static func lookup(_ db: Database, _ key: String) throws -> Lookup {
    let statement = try db.cachedStatement(sql: "SELECT \(Row.columns) FROM entries WHERE key = ?")
    guard let row = try GRDB.Row.fetchOne(statement, arguments: [key]) else { return .absent }
    return Row(row).map { .found($0) } ?? .corrupt
  }

  /// Runs `body` in an immediate (write-locking) transaction. Without `waitingForLock`, it fails
  /// at once (SQLITE_BUSY) when another connection holds the write lock, instead of waiting up
  /// to ``busyMilliseconds`` for it.
  func write<T>(waitingForLock: Bool = true, _ body: (Database) throws -> T) throws -> T {
    try database.writeWithoutTransaction { db in
      if !waitingForLock { try db.execute(sql: "PRAGMA busy_timeout = 0") }
      defer { if !waitingForLock { try? db.execute(sql: "PRAGMA busy_timeout = \(Self.busyMilliseconds)") } }
      var result: T?
      try db.inTransaction(.immediate) {
        result = try body(db)
        return .commit
      }
      guard let result else { throw PipelineError(.cacheFailed, "the disk cache index transaction did not run") }
      return result
    }
  }

  /// Inserts or replaces a row. The `file` column keeps the entry's relative path for older
  /// readers; this version never reads it (entry names come from keys).
  static func upsert(
    _ db: Database, key: String, source: String, file: String, size: Int, type: String, entry: CacheEntry, now: Date
  ) throws {
    try db.execute(
      sql: """
        INSERT OR REPLACE INTO entries (key, source, file, size, type, storedAt, expiresAt, accessedAt, etag, lastModified)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
      arguments: [
        key, source, file, size, type, entry.storedAt.timeIntervalSince1970, entry.expiresAt?.timeIntervalSince1970,
        now.timeIntervalSince1970, entry.validators.etag, entry.validators.lastModified,
      ])
  }

  /// A row to remove: its key as stored (any type, so that a corrupt row can be deleted) and, when
  /// the key is text, the key itself (its entry file is then named by it).
  struct Victim {
    var storedKey: DatabaseValue
    var key: String?
  }

  /// Least recently used entries to drop so that at most `maxBytes` and `maxCount` remain. Rows
  /// that do not decode are dropped too as they are met. Sizes are summed with `TOTAL` (a REAL,
  /// never an overflow error) over valid sizes only.
  static func evictionVictims(_ db: Database, maxBytes: Int, maxCount: Int) throws -> [Victim] {
    var (count, bytes) = try totals(db)
    guard bytes > maxBytes || count > maxCount else { return [] }
    var victims: [Victim] = []
    let cursor = try GRDB.Row.fetchCursor(db, sql: "SELECT \(Row.columns) FROM entries ORDER BY accessedAt ASC")
    while bytes > maxBytes || count > maxCount, let row = try cursor.next() {
      let storedKey = row.databaseValues.first ?? .null
      if let decoded = Row(row) {
        victims.append(Victim(storedKey: storedKey, key: decoded.key))
        bytes -= decoded.size
      } else {
        victims.append(Victim(storedKey: storedKey, key: IndexValue.text(storedKey)))
      }
      count -= 1
    }
    return victims
  }

  /// Rows that do not decode (every row is read).
  static func corruptRows(_ db: Database) throws -> [Victim] {
    var corrupt: [Victim] = []
    let cursor = try GRDB.Row.fetchCursor(db, sql: "SELECT \(Row.columns) FROM entries")
    while let row = try cursor.next() {
      guard Row(row) == nil else { continue }
      let storedKey = row.databaseValues.first ?? .null
      corrupt.append(Victim(storedKey: storedKey, key: IndexValue.text(storedKey)))
    }
    return corrupt
  }

  /// The keys of every row, as stored (text or not).
  static func storedKeys(_ db: Database, source: String? = nil) throws -> [DatabaseValue] {
    if let source {
      return try DatabaseValue.fetchAll(db, sql: "SELECT key FROM entries WHERE source = ?", arguments: [source])
    }
    return try DatabaseValue.fetchAll(db, sql: "SELECT key FROM entries")
  }

  static func delete(_ db: Database, keys: [String]) throws {
    for key in keys { try db.execute(sql: "DELETE FROM entries WHERE key = ?", arguments: [key]) }
  }

  /// Deletes rows by their stored keys (`IS`, so a NULL or blob key matches too).
  static func delete(_ db: Database, storedKeys: [DatabaseValue]) throws {
    for key in storedKeys { try db.execute(sql: "DELETE FROM entries WHERE key IS ?", arguments: [key]) }
  }

  /// Writes access times. Without `waitingForLock`, it fails at once when another connection
  /// holds the write lock (the times are lost; they only order evictions).
  func touch(_ accesses: [String: Date], waitingForLock: Bool = true) throws {
    guard !accesses.isEmpty else { return }
    try write(waitingForLock: waitingForLock) { db in
      for (key, date) in accesses {
        try db.execute(
          sql: "UPDATE entries SET accessedAt = MAX(accessedAt, ?) WHERE key = ?", arguments: [date.timeIntervalSince1970, key])
      }
    }
  }

  /// Rows and bytes; sizes that are not valid are not counted, and the byte total never
  /// overflows.
  func totals() throws -> (entries: Int, bytes: Int) { try database.read { db in try Self.totals(db) } }

  static func totals(_ db: Database) throws -> (entries: Int, bytes: Int) {
    let sql = """
      SELECT COUNT(*), TOTAL(CASE WHEN typeof(size) = 'integer' AND size BETWEEN 0 AND \(IndexValue.maxEntrySize)
        THEN size END) FROM entries
      """
    let values = try GRDB.Row.fetchOne(db, sql: sql).map { Array($0.databaseValues) } ?? []
    guard values.count == 2, let count = IndexValue.count(values[0]) else {
      throw PipelineError(.cacheFailed, "the disk cache index gave no totals; it may be damaged")
    }
    return (count, IndexValue.total(values[1]))
  }
}
