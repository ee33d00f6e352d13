import DarkroomCore
import Foundation

extension DiskStore {
  private static let instances = StoreInstances<DiskStore>()

  /// The process's store for `directory` (opened once, then shared by every pipeline naming it:
  /// the index is locked). Purging it is the caller's: a `cache` stage loaded from JSON keeps it
  /// in its `PipelineResources`.
  public static func open(directory: String, maxBytes: Int = 1 << 30, maxCount: Int = 100_000) throws -> DiskStore {
    let path = URL(fileURLWithPath: directory).standardizedFileURL.path
    return try instances.instance(for: path) { try DiskStore(directory: path, maxBytes: maxBytes, maxCount: maxCount) }
  }
}

/// The value types disk stores can rebuild, by tag. ``EncodedImage`` and ``FetchedData`` are
/// known; register your own `CacheSerializable` types before use.
package final class CacheSerializableTypes: Sendable {
  public static let shared = CacheSerializableTypes()
  private let types = Protected<[String: any CacheSerializable.Type]>([
    EncodedImage.cacheTypeTag: EncodedImage.self, FetchedData.cacheTypeTag: FetchedData.self,
  ])

  /// Makes `type` readable from disk entries.
  public func register(_ type: any CacheSerializable.Type) { types.withLock { $0[type.cacheTypeTag] = type } }

  func type(for tag: String) -> (any CacheSerializable.Type)? { types.withLock { $0[tag] } }
}

/// One open store per key (a directory, a table file) in a process, created on first use.
///
/// ```swift
/// let store = try instances.instance(for: path) { try DiskStore(directory: path) }
/// ```
package final class StoreInstances<Store: AnyObject & Sendable>: Sendable {
  private let stores = Protected<[String: Store]>([:])

  public init() {}

  /// The store for `key`, created by `create` the first time.
  public func instance(for key: String, create: () throws -> Store) throws -> Store {
    try stores.withLock { stores in
      if let store = stores[key] { return store }
      let store = try create()
      stores[key] = store
      return store
    }
  }
}

/// Access times recorded by hits, written to the index in batches.
final class AccessLog: Sendable {
  private let pending = Protected<[String: Date]>([:])

  /// Records an access; returns a batch to write when enough have gathered.
  func record(_ key: String, at date: Date) -> [String: Date]? {
    pending.withLock { pending in
      pending[key] = date
      guard pending.count >= 64 else { return nil }
      defer { pending.removeAll(keepingCapacity: true) }
      return pending
    }
  }

  func drain() -> [String: Date] {
    pending.withLock { pending in
      defer { pending.removeAll() }
      return pending
    }
  }
}

/// A thread-safe counter.
final class Counter: Sendable {
  private let count = Protected(0)
  var value: Int { count.value }
  func increment() { count.withLock { $0 += 1 } }
}
