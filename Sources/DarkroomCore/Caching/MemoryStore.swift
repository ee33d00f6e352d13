import Foundation

/// The memory store: a `MemoryCache` of ``CacheEntry`` values with an index from source to keys.
///
/// Hits take one shard lock (no global lock); the source index is touched only when storing and
/// purging. Stale entries with validators stay (LRU-bounded) so they can be revalidated.
/// `MemoryPressureMonitor` trims the shared store when the process's cgroup is short of memory.
///
/// ```swift
/// let store = MemoryStore(costLimit: 64 << 20, countLimit: 1_000)
/// let stage = Cache<EncodedImage>(store: store, maxAge: .seconds(600))
/// ```
public final class MemoryStore: CacheStore {
  /// The process's memory store: an LRU of at most 256 MiB and 10,000 entries.
  public static let shared = MemoryStore(costLimit: 256 << 20, countLimit: 10_000)

  package let cache: MemoryCache<String, CacheEntry>
  public let name = "memory"
  private let clock: @Sendable () -> Date
  private let sources = SourceIndex()

  /// Creates a store; `now` is the clock expiry is judged by.
  public init(costLimit: Int, countLimit: Int = .max, now: @escaping @Sendable () -> Date = { Date() }) {
    self.cache = MemoryCache(costLimit: costLimit, countLimit: countLimit)
    self.clock = now
  }

  public var now: Date { clock() }

  public func entry(forKey key: String) async throws -> CacheEntry? {
    guard let entry = cache.value(forKey: key) else { return nil }
    if entry.isWorthKeeping(at: now) { return entry }
    cache.removeValue(forKey: key)
    return nil
  }

  public func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {
    var entry = entry
    let costed = entry.value as? any CacheCost
    if let costed { entry.value = costed.keptCompactly() }
    cache.setValue(entry, forKey: key, cost: costed?.cacheCost ?? 1024)
    if sources.insert(key, for: source) > max(4096, min(cache.countLimit, 1 << 20) * 2) {
      sources.prune { cache.contains($0) }
    }
  }

  public func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {
    guard var entry = cache.value(forKey: key) else { return }
    entry.expiresAt = expiresAt
    entry.validators = validators
    let cost = (entry.value as? any CacheCost)?.cacheCost ?? 1024
    cache.setValue(entry, forKey: key, cost: cost)
  }

  public func removeEntry(forKey key: String) async throws { cache.removeValue(forKey: key) }

  public func removeAll() async throws {
    cache.removeAll()
    sources.removeAll()
  }

  public func purge(source: ImageSource) async throws -> Int {
    var removed = 0
    for key in sources.remove(source.identity) where cache.removeValue(forKey: key) != nil { removed += 1 }
    return removed
  }

  public func statistics() async throws -> CacheStatistics {
    CacheStatistics(
      store: name, entries: cache.count, bytes: cache.totalCost, byteLimit: cache.costLimit,
      countLimit: cache.countLimit == .max ? nil : cache.countLimit)
  }

  /// Evicts least recently used entries down to `cost` bytes (the server's "memory warning").
  public func trim(toCost cost: Int) { cache.trim(toCost: cost) }
}

/// Source identity → keys, so purging one source touches only its own entries. Keys whose
/// entries were evicted are dropped lazily, when their source is purged.
final class SourceIndex: Sendable {
  private let state = Protected((keys: [String: Set<String>](), total: 0))

  /// Adds a key; returns how many keys the index holds.
  func insert(_ key: String, for source: String) -> Int {
    state.withLock { state in
      if state.keys[source, default: []].insert(key).inserted { state.total += 1 }
      return state.total
    }
  }

  /// Keeps only the keys `isLive` says are still stored.
  func prune(isLive: (String) -> Bool) {
    state.withLock { state in
      state.keys = state.keys.compactMapValues { set in
        let live = set.filter(isLive)
        return live.isEmpty ? nil : live
      }
      state.total = state.keys.values.reduce(0) { $0 + $1.count }
    }
  }

  func remove(_ source: String) -> Set<String> {
    state.withLock { state in
      let removed = state.keys.removeValue(forKey: source) ?? []
      state.total -= removed.count
      return removed
    }
  }

  func removeAll() {
    state.withLock { state in
      state.keys.removeAll()
      state.total = 0
    }
  }
}
