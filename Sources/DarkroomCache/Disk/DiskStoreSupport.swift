import DarkroomCore
import Foundation

extension DiskStore {
  private static let instances = StoreInstances<DiskStore>()

  /// The process's store for `directory` (opened once, then shared by every pipeline naming it:
  /// the index is locked). Purging it is the caller's: a `cache` stage loaded from JSON keeps it
  /// in its ``PipelineResources``.
  public static func open(directory: String, maxBytes: Int = 1 << 30, maxCount: Int = 100_000) throws -> DiskStore {
    let path = URL(fileURLWithPath: directory).standardizedFileURL.path
    return try instances.instance(for: path) { try DiskStore(directory: path, maxBytes: maxBytes, maxCount: maxCount) }
  }
}

/// The value types disk stores can rebuild, by tag. ``EncodedImage`` and ``FetchedData`` are
/// known; register your own ``CacheSerializable`` types before use.
public final class CacheSerializableTypes: @unchecked Sendable {
  public static let shared = CacheSerializableTypes()
  private let lock = NSLock()
  private var types: [String: any CacheSerializable.Type] = [
    EncodedImage.cacheTypeTag: EncodedImage.self, FetchedData.cacheTypeTag: FetchedData.self,
  ]

  /// Makes `type` readable from disk entries.
  public func register(_ type: any CacheSerializable.Type) {
    lock.lock()
    defer { lock.unlock() }
    types[type.cacheTypeTag] = type
  }

  func type(for tag: String) -> (any CacheSerializable.Type)? {
    lock.lock()
    defer { lock.unlock() }
    return types[tag]
  }
}

/// One open store per key (a directory, a table file) in a process, created on first use.
///
/// ```swift
/// let store = try instances.instance(for: path) { try DiskStore(directory: path) }
/// ```
public final class StoreInstances<Store: AnyObject & Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var stores: [String: Store] = [:]

  public init() {}

  /// The store for `key`, created by `create` the first time.
  public func instance(for key: String, create: () throws -> Store) throws -> Store {
    lock.lock()
    defer { lock.unlock() }
    if let store = stores[key] { return store }
    let store = try create()
    stores[key] = store
    return store
  }
}

/// Access times recorded by hits, written to the index in batches.
final class AccessLog: @unchecked Sendable {
  private let lock = NSLock()
  private var pending: [String: Date] = [:]

  /// Records an access; returns a batch to write when enough have gathered.
  func record(_ key: String, at date: Date) -> [String: Date]? {
    lock.lock()
    defer { lock.unlock() }
    pending[key] = date
    guard pending.count >= 64 else { return nil }
    defer { pending.removeAll(keepingCapacity: true) }
    return pending
  }

  func drain() -> [String: Date] {
    lock.lock()
    defer { lock.unlock() }
    defer { pending.removeAll() }
    return pending
  }
}

/// A thread-safe counter.
final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var count = 0
  var value: Int {
    lock.lock()
    defer { lock.unlock() }
    return count
  }
  func increment() {
    lock.lock()
    count += 1
    lock.unlock()
  }
}
