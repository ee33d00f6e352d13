import Foundation

/// What a cache keeps about a value: the value, when it was stored, until when it is fresh, and
/// the validators that let a stale copy be revalidated with a conditional request.
///
/// ```swift
/// let entry = CacheEntry(value: image, expiresAt: Date() + 3600, validators: CacheValidators(etag: "\"v1\""))
/// entry.isFresh(at: Date())   // true for an hour
/// ```
public struct CacheEntry: Sendable {
  /// The cached value.
  public var value: any Sendable
  /// When it was stored.
  public var storedAt: Date
  /// When it stops being fresh; `nil` keeps it until it is evicted.
  public var expiresAt: Date?
  /// The response's `ETag` and `Last-Modified`, for revalidation.
  public var validators: CacheValidators

  public init(value: any Sendable, storedAt: Date = Date(), expiresAt: Date? = nil, validators: CacheValidators = .none) {
    self.value = value
    self.storedAt = storedAt
    self.expiresAt = expiresAt
    self.validators = validators
  }

  /// True until `expiresAt`.
  public func isFresh(at now: Date) -> Bool { expiresAt.map { now < $0 } ?? true }

  /// Whether a store keeps the entry at `now`: fresh ones, and stale ones that can be revalidated.
  public func isWorthKeeping(at now: Date) -> Bool { isFresh(at: now) || !validators.isEmpty }
}

/// The validators of an HTTP response (or a file's modification time), sent back as
/// `If-None-Match` / `If-Modified-Since` to revalidate a stale copy.
///
/// ```swift
/// let validators = CacheValidators(etag: "W/\"v1\"")
/// validators.isEmpty                                          // false
/// CacheValidators.sameETag(validators.etag ?? "", "\"v1\"")   // true: weak comparison
/// ```
public struct CacheValidators: Sendable, Hashable, Codable {
  /// The `ETag` header, verbatim (quotes included).
  public var etag: String?
  /// The `Last-Modified` header, verbatim.
  public var lastModified: String?

  public static let none = CacheValidators()

  /// Whether two `ETag` values name the same representation (weak comparison, RFC 9110 8.8.3.2:
  /// the opaque tags are equal, with or without `W/`).
  public static func sameETag(_ one: String, _ other: String) -> Bool {
    func opaque(_ tag: String) -> Substring {
      let trimmed = tag.trimmingCharacters(in: .whitespaces)
      return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed[...]
    }
    return opaque(one) == opaque(other)
  }

  public init(etag: String? = nil, lastModified: String? = nil) {
    self.etag = etag?.isEmpty == true ? nil : etag
    self.lastModified = lastModified?.isEmpty == true ? nil : lastModified
  }

  /// The validators of a fetched response.
  public init(_ fetched: FetchedData) {
    self.init(
      etag: fetched.etag,
      lastModified: fetched.metadata["last-modified"] ?? fetched.lastModified.map { HTTPDate.format($0) })
  }

  /// True when there is nothing to revalidate with.
  public var isEmpty: Bool { etag == nil && lastModified == nil }
}

/// How a checkpoint computes an entry's expiry from its `maxAge` and the fetched response,
/// following Nimbus: `maxAge > 0` overrides the response's headers; `nil` (JSON `0`) uses the
/// response's `Cache-Control` / `Expires` (`no-store` is not stored; a zero lifetime is stored
/// only when it can be revalidated); `maxAge < 0` never keeps the value in memory.
package struct CachePolicy: Sendable, Hashable {
  public var maxAge: Duration?

  public init(maxAge: Duration?) { self.maxAge = maxAge }

  /// What to do with a value: `nil` when it must not be stored, otherwise its expiry (`.some(nil)`:
  /// no expiry).
  public func expiry(now: Date, freshness: Freshness?, validators: CacheValidators, storeIsMemory: Bool) -> Date?? {
    if let maxAge, maxAge > .zero { return .some(now + maxAge.timeInterval) }
    if let maxAge, maxAge < .zero { return storeIsMemory ? nil : .some(nil) }
    switch freshness {
    case .noStore?: return nil
    case .lifetime(let lifetime)?:
      if lifetime <= .zero && validators.isEmpty { return nil }
      return .some(now + lifetime.timeInterval)
    case .unspecified?, nil: return .some(nil)
    }
  }
}

/// What a store holds, for `darkroom cache stats`.
///
/// ```swift
/// let statistics = try await MemoryStore(costLimit: 64 << 20).statistics()
/// print(statistics.store, statistics.entries, statistics.bytes)   // memory 0 0
/// ```
public struct CacheStatistics: Sendable, Hashable, Codable {
  public var store: String
  public var entries: Int
  public var bytes: Int
  public var byteLimit: Int?
  public var countLimit: Int?
  /// Where it lives, for stores on disk.
  public var location: String?

  public init(store: String, entries: Int, bytes: Int, byteLimit: Int? = nil, countLimit: Int? = nil, location: String? = nil) {
    self.store = store
    self.entries = entries
    self.bytes = bytes
    self.byteLimit = byteLimit
    self.countLimit = countLimit
    self.location = location
  }
}

extension Duration {
  /// The duration in seconds, as Foundation counts time.
  public var timeInterval: TimeInterval {
    let (seconds, attoseconds) = components
    return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
  }
}
