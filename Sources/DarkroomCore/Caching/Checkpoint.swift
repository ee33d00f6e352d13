/// A pipeline checkpoint: the executor stores the value flowing through it when an operation
/// finishes, and a later run of the same source resumes after the latest checkpoint that has it.
///
/// The key is the checkpoint's prefix, the source's identity and the identifiers of every stage
/// before it, so a different configuration upstream never reads a stale value.
///
/// ```swift
/// let pipeline = Pipeline(name: "thumb") {
///   Fetcher(); Decoder(); Resizer(width: 300); Encoder(.jpeg())
///   Cache<EncodedImage>(store: MemoryStore.shared, maxAge: .seconds(3600))
/// }
/// ```
public protocol CheckpointStage: Sendable {
  /// The store's name for events (`"memory"`).
  var storeName: String { get }
  /// A user prefix that separates otherwise equal keys (Nimbus' memoryCachePrefix).
  var keyPrefix: String { get }
  /// The stored value for a key, if any and still fresh.
  func lookup(key: String) async throws -> (any Sendable)?
  /// Stores a value; `freshness` is what the fetched response said about itself, if anything.
  func store(_ value: any Sendable, key: String, freshness: Freshness?) async throws
}

/// Where a ``Cache`` keeps values.
public protocol CacheStore: Sendable {
  var name: String { get }
  func value(forKey key: String) async throws -> (any Sendable)?
  func setValue(_ value: any Sendable, forKey key: String, cost: Int, lifetime: Duration?) async throws
  func removeAll() async throws
  /// Removes every value derived from `source` — every variant, prefix and upstream configuration.
  func purge(source: ImageSource) async throws
}

/// Cache keys: the checkpoint's prefix, the source identity and the upstream stage identifiers,
/// joined by the unit separator (U+001F), which never appears in identities.
public enum CacheKey {
  static let separator: Character = "\u{1F}"

  /// The key of a checkpoint.
  public static func make(prefix: String, source identity: String, upstream: [String]) -> String {
    ([prefix, identity] + upstream).joined(separator: String(separator))
  }

  /// The source identity a key belongs to.
  public static func sourceIdentity(of key: String) -> Substring? {
    let parts = key.split(separator: separator, maxSplits: 2, omittingEmptySubsequences: false)
    return parts.count >= 2 ? parts[1] : nil
  }
}

/// What a value costs to keep in memory, in bytes (values without it count 1 KiB).
public protocol CacheCost {
  var cacheCost: Int { get }
}

extension EncodedImage: CacheCost { public var cacheCost: Int { bytes.count } }
extension FetchedData: CacheCost { public var cacheCost: Int { bytes.count } }

/// The process's memory store: an LRU of at most 256 MiB and 10,000 entries.
public struct MemoryStore: CacheStore {
  public static let shared = MemoryStore(cache: MemoryCache(costLimit: 256 << 20, countLimit: 10_000))

  public let cache: MemoryCache<String, any Sendable>
  public let name = "memory"

  public init(cache: MemoryCache<String, any Sendable>) { self.cache = cache }

  public func value(forKey key: String) async throws -> (any Sendable)? { cache.value(forKey: key) }

  public func setValue(_ value: any Sendable, forKey key: String, cost: Int, lifetime: Duration?) async throws {
    cache.setValue(value, forKey: key, cost: cost, lifetime: lifetime)
  }

  public func removeAll() async throws { cache.removeAll() }

  public func purge(source: ImageSource) async throws {
    let identity = source.identity
    cache.removeAll { CacheKey.sourceIdentity(of: $0) == Substring(identity) }
  }
}

/// The `cache` stage: a checkpoint over a store (see ``CheckpointStage``).
///
/// `maxAge` follows Nimbus: greater than zero overrides the response's headers; zero (`nil`)
/// uses the fetched response's `Cache-Control`/`Expires` (not stored when they say `no-store`);
/// less than zero never keeps the value in memory.
public struct Cache<Value: Sendable>: Stage, CheckpointStage {
  public static var kind: String { "cache" }

  public var store: any CacheStore
  public var maxAge: Duration?
  public var keyPrefix: String

  public init(store: any CacheStore = MemoryStore.shared, maxAge: Duration? = nil, prefix: String = "") {
    self.store = store
    self.maxAge = maxAge
    self.keyPrefix = prefix
  }

  public var identifier: String { "cache(\(store.name),maxAge=\(maxAge.map { "\($0)" } ?? "headers"),prefix=\(keyPrefix))" }
  public var storeName: String { store.name }

  /// The checkpoint work is done by the executor; running the stage hands the value on.
  public func process(_ input: Value, context: StageContext) async throws -> Value { input }

  public func lookup(key: String) async throws -> (any Sendable)? {
    if let maxAge, maxAge < .zero, store.name == "memory" { return nil }
    return try await store.value(forKey: key)
  }

  public func store(_ value: any Sendable, key: String, freshness: Freshness?) async throws {
    let lifetime: Duration?
    if let maxAge, maxAge > .zero {
      lifetime = maxAge
    } else if let maxAge, maxAge < .zero {
      if store.name == "memory" { return }
      lifetime = nil
    } else {
      switch freshness {
      case .noStore?: return
      case .lifetime(let duration)?: lifetime = duration
      default: lifetime = nil
      }
    }
    if let lifetime, lifetime <= .zero { return }
    let cost = (value as? any CacheCost)?.cacheCost ?? 1024
    try await store.setValue(value, forKey: key, cost: cost, lifetime: lifetime)
  }
}

/// Builds ``Cache`` stages for the `cache` kind, whatever value flows at their place.
public struct CacheFactory: PassThroughStageFactory {
  public var store: any CacheStore
  public var maxAge: Duration?
  public var prefix: String

  public init(store: any CacheStore, maxAge: Duration?, prefix: String) {
    self.store = store
    self.maxAge = maxAge
    self.prefix = prefix
  }

  public func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage {
    AnyStage(Cache<Value>(store: store, maxAge: maxAge, prefix: prefix))
  }
}
