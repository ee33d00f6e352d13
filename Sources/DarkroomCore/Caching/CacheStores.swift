import Foundation

/// A set of cache stores one call can purge a source from.
///
/// There is no process-wide set: the stores a loaded definition names are kept in the loader's
/// ``PipelineResources`` (see ``PipelineResources/purge(source:)``); the stores you open in code
/// are yours to gather in one of these.
///
/// ```swift
/// let stores = CacheStores()
/// stores.register(MemoryStore.shared, id: "memory")
/// stores.register(try DiskStore.open(directory: "/var/cache/darkroom"), id: "disk")
/// let removed = try await stores.purge(source: ImageSource("https://cdn.example.com/a.jpg"))
/// ```
public final class CacheStores: Sendable {
  private let stores = Protected<[(id: String, store: any CacheStore)]>([])

  /// An empty set.
  public init() {}

  /// Adds a store under an id (one store per id).
  public func register(_ store: any CacheStore, id: String) {
    stores.withLock { stores in
      stores.removeAll { $0.id == id }
      stores.append((id, store))
    }
  }

  /// Forgets every store; returns them.
  func removeAll() -> [any CacheStore] {
    stores.withLock { stores in
      defer { stores = [] }
      return stores.map(\.store)
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
