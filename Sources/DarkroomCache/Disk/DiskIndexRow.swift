import DarkroomCore
import Foundation
import GRDB

/// Values read from the index, decoded without trusting them.
///
/// Every column is read as a `DatabaseValue` and converted with optional conversions and range
/// checks: text where a number belongs, a blob, a NULL, a huge or fractional number, a non-finite
/// or absurd date all decode to `nil` (the row is corrupt), never to a trap. GRDB's typed
/// subscripts and `fetchAll`/`fetchOne` of a type are not used on index data: they stop the
/// process on a value that does not convert.
enum IndexValue {
  /// The largest entry size a row may declare (1 TiB).
  static let maxEntrySize: Int64 = 1 << 40
  /// The latest date accepted (9999-12-31T23:59:59Z); the earliest is 1970-01-01.
  static let maxSeconds: Double = 253_402_300_799
  /// The longest key or source accepted, in UTF-8 bytes.
  static let maxTextBytes = 1 << 20
  /// The longest type tag and validator accepted, in UTF-8 bytes.
  static let maxShortTextBytes = 8192

  /// Text of at most `limit` UTF-8 bytes.
  static func text(_ value: DatabaseValue, limit: Int = maxTextBytes) -> String? {
    guard case .string(let text) = value.storage, text.utf8.count <= limit else { return nil }
    return text
  }

  /// NULL, or a header-safe text (no control character but tab) of at most 8 KiB: an ETag or a
  /// `Last-Modified` value that goes back into a request header.
  static func validator(_ value: DatabaseValue) -> String?? {
    if value.isNull { return .some(nil) }
    guard let text = text(value, limit: maxShortTextBytes),
      !text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F })
    else { return nil }
    return .some(text)
  }

  /// A whole number in `range` (an INTEGER, or a REAL that is exactly one).
  static func integer(_ value: DatabaseValue, in range: ClosedRange<Int64>) -> Int? {
    let number: Int64?
    switch value.storage {
    case .int64(let integer): number = integer
    case .double(let real): number = Int64(exactly: real)
    default: number = nil
    }
    guard let number, range.contains(number) else { return nil }
    return Int(exactly: number)
  }

  /// A date: seconds since 1970 (INTEGER or finite REAL) between 1970 and 9999.
  static func date(_ value: DatabaseValue) -> Date? {
    let seconds: Double
    switch value.storage {
    case .int64(let integer): seconds = Double(integer)
    case .double(let real): seconds = real
    default: return nil
    }
    guard seconds.isFinite, seconds >= 0, seconds <= maxSeconds else { return nil }
    return Date(timeIntervalSince1970: seconds)
  }

  /// NULL, or a ``date(_:)``.
  static func optionalDate(_ value: DatabaseValue) -> Date?? {
    if value.isNull { return .some(nil) }
    return date(value).map { .some($0) }
  }

  /// A count from an aggregate (`COUNT(*)`): an INTEGER ≥ 0.
  static func count(_ value: DatabaseValue) -> Int? { integer(value, in: 0...Int64.max) }

  /// A byte total from `TOTAL(…)` (a REAL, never an overflow): clamped to 0…2^62.
  static func total(_ value: DatabaseValue) -> Int {
    let limit = Double(1 << 62)
    switch value.storage {
    case .int64(let integer): return Int(min(max(integer, 0), 1 << 62))
    case .double(let real) where real.isFinite: return Int(min(max(real, 0), limit))
    default: return 0
    }
  }
}

extension DiskIndex {
  /// One entry's row, decoded.
  struct Row: Sendable {
    var key: String
    var source: String
    var size: Int
    var type: String
    var storedAt: Date
    var expiresAt: Date?
    var accessedAt: Date
    var validators: CacheValidators

    /// The columns ``init(_:)`` decodes, in order.
    static let columns = "key, source, size, type, storedAt, expiresAt, accessedAt, etag, lastModified"

    /// Decodes a row selected with ``columns``; `nil` when any value is out of its type or range.
    init?(_ row: GRDB.Row) {
      let values = Array(row.databaseValues)
      guard values.count == 9, let key = IndexValue.text(values[0]), let source = IndexValue.text(values[1]),
        let size = IndexValue.integer(values[2], in: 0...IndexValue.maxEntrySize),
        let type = IndexValue.text(values[3], limit: IndexValue.maxShortTextBytes), !type.isEmpty,
        let storedAt = IndexValue.date(values[4]), let expiresAt = IndexValue.optionalDate(values[5]),
        let accessedAt = IndexValue.date(values[6]), let etag = IndexValue.validator(values[7]),
        let lastModified = IndexValue.validator(values[8])
      else { return nil }
      self.key = key
      self.source = source
      self.size = size
      self.type = type
      self.storedAt = storedAt
      self.expiresAt = expiresAt
      self.accessedAt = accessedAt
      validators = CacheValidators(etag: etag, lastModified: lastModified)
    }
  }

  /// What the index says about one key.
  enum Lookup: Sendable {
    case absent
    /// A row is there but does not decode: a miss, to be removed.
    case corrupt
    case found(Row)
  }
}
