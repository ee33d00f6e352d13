import Foundation

/// Every cache store open in the process, so one call can purge a source from all of them.
///
/// ``MemoryStore/shared`` is always registered; `DiskStore.open` and table stores register
/// themselves. Register your own stores to include them.
///
/// ```swift
/// let removed = try await CacheStores.shared.purge(source: ImageSource("https://cdn.example.com/a.jpg"))
/// ```
public final class CacheStores: Sendable {
  public static let shared = CacheStores()
  private let stores: Protected<[(id: String, store: any CacheStore)]>

  init() { stores = Protected([("memory", MemoryStore.shared)]) }

  /// Adds a store under an id (one store per id).
  public func register(_ store: any CacheStore, id: String) {
    stores.withLock { stores in
      stores.removeAll { $0.id == id }
      stores.append((id, store))
    }
  }

  /// The registered stores.
  public var all: [any CacheStore] { stores.withLock { $0.map(\.store) } }

  /// Removes every cached variant of `source` from every store; returns the count per store.
  public func purge(source: ImageSource) async throws -> [String: Int] {
    // A file's entries are recorded under its resolved path (symlinks and `..` resolved).
    let source = try await BlockingPool.shared.run { source.resolved }
    var removed: [String: Int] = [:]
    for store in all { removed[store.name, default: 0] += try await store.purge(source: source) }
    return removed
  }
}
