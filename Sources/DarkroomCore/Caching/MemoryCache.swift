import Foundation

/// An in-memory LRU cache bounded by total cost (bytes) and by count, with per-entry lifetimes.
///
/// Entries are spread over shards by key hash, each with its own lock, so concurrent hits on
/// different keys do not contend on one global lock. Each shard keeps its own least-recently-used
/// order and an equal share of the limits. Time comes from an injectable clock, so lifetimes are
/// testable without waiting.
///
/// ```swift
/// let cache = MemoryCache<String, EncodedImage>(costLimit: 256 << 20, countLimit: 10_000)
/// cache.setValue(image, forKey: "avatar:42", cost: image.bytes.count, lifetime: .seconds(3600))
/// let hit = cache.value(forKey: "avatar:42")
/// ```
package final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The most total cost kept; least recently used entries are evicted beyond it.
  public let costLimit: Int
  /// The most entries kept.
  public let countLimit: Int
  private let shards: [Protected<Shard>]
  private let now: @Sendable () -> ContinuousClock.Instant

  /// Creates a cache. `shards` trades lock contention for LRU precision (eviction is least
  /// recently used within a shard); `now` is the clock lifetimes are measured on.
  public init(
    costLimit: Int, countLimit: Int = .max, shards: Int = 8,
    now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
  ) {
    self.costLimit = max(0, costLimit)
    self.countLimit = max(0, countLimit)
    let count = max(1, shards)
    let costShare = self.costLimit / count
    let countShare = max(1, self.countLimit == .max ? .max : self.countLimit / count)
    self.shards = (0..<count).map { _ in Protected(Shard(costLimit: costShare, countLimit: countShare)) }
    self.now = now
  }

  private func shard(for key: Key) -> Protected<Shard> {
    shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
  }

  /// The value for `key`, or `nil` when absent or expired (an expired entry is removed). A hit
  /// makes the entry the most recently used.
  public func value(forKey key: Key) -> Value? {
    let instant = now()
    return shard(for: key).withLock { $0.value(for: key, now: instant) }
  }

  /// Stores a value with its cost (usually its size in bytes) and an optional lifetime, evicting
  /// least recently used entries as needed. A value costing more than a shard's share is not kept.
  public func setValue(_ value: Value, forKey key: Key, cost: Int, lifetime: Duration? = nil) {
    let expiry = lifetime.map { now() + $0 }
    shard(for: key).withLock { $0.insert(value, for: key, cost: max(0, cost), expiry: expiry) }
  }

  /// Whether `key` has an entry (expired or not), without touching its recency.
  public func contains(_ key: Key) -> Bool { shard(for: key).withLock { $0.entries[key] != nil } }

  /// Removes one entry; returns its value if there was one.
  @discardableResult
  public func removeValue(forKey key: Key) -> Value? {
    shard(for: key).withLock { $0.remove(key)?.value }
  }

  /// Removes every entry whose key satisfies `predicate` (for purging all variants of a source).
  public func removeAll(where predicate: (Key) -> Bool) {
    for shard in shards { shard.withLock { $0.removeAll(where: predicate) } }
  }

  /// Removes everything.
  public func removeAll() {
    for shard in shards { shard.withLock { $0.removeAll(where: { _ in true }) } }
  }

  /// Evicts least recently used entries until the total cost is at most `cost` (the server's
  /// "memory warning").
  public func trim(toCost cost: Int) {
    let share = max(0, cost) / shards.count
    for shard in shards { shard.withLock { $0.trim(cost: share, count: .max) } }
  }

  /// The total cost of the entries.
  public var totalCost: Int { shards.reduce(0) { total, shard in total + shard.withLock { $0.totalCost } } }
  /// The number of entries.
  public var count: Int { shards.reduce(0) { total, shard in total + shard.withLock { $0.entries.count } } }
}

extension MemoryCache {
  /// One shard (each behind its own lock, a ``Protected``): a dictionary plus a doubly linked
  /// recency list threaded through it by key.
  struct Shard {
    struct Entry {
      var value: Value
      var cost: Int
      var expiry: ContinuousClock.Instant?
      var newer: Key?
      var older: Key?
    }

    let costLimit: Int
    let countLimit: Int
    var entries: [Key: Entry] = [:]
    var newest: Key?
    var oldest: Key?
    var totalCost = 0

    init(costLimit: Int, countLimit: Int) {
      self.costLimit = costLimit
      self.countLimit = countLimit
    }

    mutating func value(for key: Key, now: ContinuousClock.Instant) -> Value? {
      guard let entry = entries[key] else { return nil }
      if let expiry = entry.expiry, expiry <= now {
        remove(key)
        return nil
      }
      unlink(key)
      linkNewest(key)
      return entry.value
    }

    mutating func insert(_ value: Value, for key: Key, cost: Int, expiry: ContinuousClock.Instant?) {
      remove(key)
      guard cost <= costLimit, countLimit > 0 else { return }
      entries[key] = Entry(value: value, cost: cost, expiry: expiry, newer: nil, older: nil)
      linkNewest(key)
      totalCost += cost
      trim(cost: costLimit, count: countLimit)
    }

    @discardableResult
    mutating func remove(_ key: Key) -> Entry? {
      guard entries[key] != nil else { return nil }
      unlink(key)
      let entry = entries.removeValue(forKey: key)
      totalCost -= entry?.cost ?? 0
      return entry
    }

    mutating func removeAll(where predicate: (Key) -> Bool) {
      for key in entries.keys.filter(predicate) { remove(key) }
    }

    mutating func trim(cost: Int, count: Int) {
      while totalCost > cost || entries.count > count, let key = oldest { remove(key) }
    }

    private mutating func linkNewest(_ key: Key) {
      entries[key]?.older = newest
      entries[key]?.newer = nil
      if let previous = newest { entries[previous]?.newer = key }
      newest = key
      if oldest == nil { oldest = key }
    }

    private mutating func unlink(_ key: Key) {
      guard let entry = entries[key] else { return }
      if let newer = entry.newer { entries[newer]?.older = entry.older } else { newest = entry.older }
      if let older = entry.older { entries[older]?.newer = entry.newer } else { oldest = entry.newer }
      entries[key]?.newer = nil
      entries[key]?.older = nil
    }
  }
}
