import DarkroomCore
import Foundation
import GRDB

#if canImport(Glibc)
  import Glibc
#endif

/// The disk store's index: an SQLite database (through GRDB) in WAL mode, shared by every process
/// using the directory. One row per entry: its key, source, file, size, type, times and validators.
///
/// Writers take an immediate transaction, so processes serialise their inserts, replacements and
/// evictions; readers never block. See Docs/Decisions/0008-disk-cache-index.md for why SQLite.
final class DiskIndex: Sendable {
  struct Row: Sendable {
    var key: String
    var file: String
    var size: Int
    var expiresAt: Date?
    var validators: CacheValidators
  }

  let database: DatabasePool

  init(path: String) throws {
    var configuration = Configuration()
    configuration.busyMode = .timeout(30)
    configuration.label = "darkroom.disk-cache"
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
    // Switching a new database to WAL fails at once (SQLITE_BUSY, no busy handler) when another
    // process does the same: opening is serialised across processes by a lock file.
    let lock = Glibc.open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard lock >= 0 else { throw DiskEntryFile.failure("cannot create \(path).lock") }
    defer { close(lock) }
    while flock(lock, LOCK_EX) != 0 && errno == EINTR {}
    defer { flock(lock, LOCK_UN) }
    database = try DatabasePool(path: path, configuration: configuration)
    // Several processes may open a new directory at once: the schema is created in an immediate
    // transaction with IF NOT EXISTS, so they serialise instead of racing a migration.
    let version = try database.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0 }
    guard version < 1 else { return }
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

  func row(forKey key: String) throws -> Row? {
    try database.read { db in
      let statement = try db.cachedStatement(
        sql: "SELECT key, file, size, expiresAt, etag, lastModified FROM entries WHERE key = ?")
      return try GRDB.Row.fetchOne(statement, arguments: [key]).map(Self.row)
    }
  }

  private static func row(_ row: GRDB.Row) -> Row {
    Row(
      key: row["key"], file: row["file"], size: row["size"],
      expiresAt: (row["expiresAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
      validators: CacheValidators(etag: row["etag"], lastModified: row["lastModified"]))
  }

  /// Runs `body` in an immediate (write-locking) transaction.
  func write<T>(_ body: (Database) throws -> T) throws -> T {
    try database.writeWithoutTransaction { db in
      var result: T?
      try db.inTransaction(.immediate) {
        result = try body(db)
        return .commit
      }
      guard let result else { throw PipelineError(.cacheFailed, "the disk cache index transaction did not run") }
      return result
    }
  }

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

  /// Least recently used entries to drop so that at most `maxBytes` and `maxCount` remain.
  static func evictionVictims(_ db: Database, maxBytes: Int, maxCount: Int) throws -> [(key: String, file: String)] {
    guard let totals = try GRDB.Row.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) AS bytes, COUNT(*) AS count FROM entries")
    else { return [] }
    var bytes: Int = totals["bytes"]
    var count: Int = totals["count"]
    guard bytes > maxBytes || count > maxCount else { return [] }
    var victims: [(key: String, file: String)] = []
    let cursor = try GRDB.Row.fetchCursor(db, sql: "SELECT key, file, size FROM entries ORDER BY accessedAt ASC")
    while bytes > maxBytes || count > maxCount, let row = try cursor.next() {
      victims.append((row["key"], row["file"]))
      bytes -= row["size"] as Int
      count -= 1
    }
    return victims
  }

  static func delete(_ db: Database, keys: [String]) throws {
    for key in keys { try db.execute(sql: "DELETE FROM entries WHERE key = ?", arguments: [key]) }
  }

  func touch(_ accesses: [String: Date]) throws {
    guard !accesses.isEmpty else { return }
    try write { db in
      for (key, date) in accesses {
        try db.execute(
          sql: "UPDATE entries SET accessedAt = MAX(accessedAt, ?) WHERE key = ?", arguments: [date.timeIntervalSince1970, key])
      }
    }
  }

  func totals() throws -> (entries: Int, bytes: Int) {
    try database.read { db in
      let row = try GRDB.Row.fetchOne(db, sql: "SELECT COUNT(*) AS count, COALESCE(SUM(size), 0) AS bytes FROM entries")
      return (row?["count"] ?? 0, row?["bytes"] ?? 0)
    }
  }

  func files() throws -> Set<String> {
    try database.read { db in Set(try String.fetchAll(db, sql: "SELECT file FROM entries")) }
  }
}
