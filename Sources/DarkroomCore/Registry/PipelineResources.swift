import Foundation

/// What loading pipeline definitions opened, owned by the caller who loads them: the notifiers
/// of `notify` stages and the cache stores of `cache` stages. Close it when the pipelines are done.
///
/// Stage factories register what they open into the ``StageBuildContext/resources`` of the
/// context they are given; nothing is kept in a process-wide registry. ``flush()`` waits until the
/// notifiers have delivered what was posted, ``close()`` delivers it and closes their sinks (a
/// webhook's retries included), and ``purge(source:)`` removes a source's cached variants from
/// every store the definitions named.
///
/// ```swift
/// let resources = PipelineResources()
/// let graph = try PipelineDefinition.load(
///   contentsOf: "thumb.json", registry: Darkroom.standardRegistry, context: StageBuildContext(resources: resources))
/// let pipeline = try Pipeline<ImageSource, any Sendable>(graph)
/// _ = try await pipeline.process(ImageSource("photo.jpg"))
/// _ = try await resources.purge(source: ImageSource("photo.jpg"))
/// await resources.close()   // after the last run: notifications are delivered before this returns
/// ```
///
/// Letting it go without closing loses nothing either: the notifiers stay with the stages that
/// post to them, and a ``Notifier`` that is let go delivers what it still holds and closes its
/// sinks on its own tasks. Only `close()` waits for that, so a program that exits right after its
/// last run should close.
public final class PipelineResources: Sendable {
  private let registered = Protected<[Notifier]>([])
  private let cacheStores = CacheStores()

  /// An empty set of resources.
  public init() {}

  /// Keeps `notifier` until ``close()``.
  public func register(_ notifier: Notifier) {
    registered.withLock { notifiers in
      if !notifiers.contains(where: { $0 === notifier }) { notifiers.append(notifier) }
    }
  }

  /// Keeps `store` under `id` for ``purge(source:)`` (one store per id: a directory opened by
  /// two `cache` stages is kept once) until ``close()``.
  public func register(_ store: any CacheStore, id: String) { cacheStores.register(store, id: id) }

  /// The notifiers registered and not yet closed, in the order registered.
  public var notifiers: [Notifier] { registered.withLock { $0 } }

  /// The cache stores registered, in the order registered.
  public var stores: [any CacheStore] { cacheStores.all }

  /// Removes every cached variant of `source` from every registered store; returns the count per
  /// store kind (`"memory"`, `"disk"`, `"table"`).
  public func purge(source: ImageSource) async throws -> [String: Int] { try await cacheStores.purge(source: source) }

  /// Waits until every registered notifier has delivered (or failed to deliver) what was posted.
  public func flush() async {
    for notifier in notifiers { await notifier.flush() }
  }

  /// Delivers what the notifiers hold, closes them and their sinks, closes the stores (see
  /// ``CacheStore/close()``) and lets them go. Posts after this are dropped: close after the last
  /// run of the pipelines loaded with it.
  public func close() async {
    let closing = registered.withLock { notifiers in
      defer { notifiers = [] }
      return notifiers
    }
    for store in cacheStores.removeAll() { await store.close() }
    for notifier in closing { await notifier.close() }
  }
}
