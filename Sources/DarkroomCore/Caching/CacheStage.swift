import Foundation

/// A pipeline checkpoint: the executor stores the value flowing through it when an operation
/// finishes, and a later run of the same source resumes after the latest checkpoint that has it.
///
/// The key is the checkpoint's prefix, the source's identity and the identifiers of every stage
/// before it, so a different configuration upstream never reads a stale value.
///
/// ```swift
/// let pipeline = Pipeline(name: "thumb") {
///   Fetcher(); ImageDecoder(); Resizer(width: 300); ImageEncoder(.jpeg())
///   Cache<EncodedImage>(store: MemoryStore.shared, maxAge: .seconds(3600))
/// }
/// ```
package protocol CheckpointStage: Sendable {
  /// The store values are kept in.
  var cacheStore: any CacheStore { get }
  /// A user prefix that separates otherwise equal keys (Nimbus' memoryCachePrefix).
  var keyPrefix: String { get }
  /// How long values stay fresh.
  var policy: CachePolicy { get }
}

/// The `cache` stage: a checkpoint over a store (see `CheckpointStage` and `CachePolicy`).
///
/// `maxAge` follows Nimbus: greater than zero overrides the response's headers; `nil` (zero in
/// JSON) uses the fetched response's `Cache-Control`/`Expires`; less than zero never keeps the
/// value in memory. A stale entry with an `ETag` or `Last-Modified` is revalidated with a
/// conditional request before anything runs; a `304` refreshes it.
///
/// ```swift
/// Cache<EncodedImage>(store: try DiskStore(directory: "/var/cache/darkroom"), maxAge: nil, prefix: "v2")
/// ```
public struct Cache<Value: Sendable>: Stage, CheckpointStage {
  public static var kind: String { "cache" }

  public var cacheStore: any CacheStore
  public var maxAge: Duration?
  public var keyPrefix: String

  public init(store: any CacheStore = MemoryStore.shared, maxAge: Duration? = nil, prefix: String = "") {
    self.cacheStore = store
    self.maxAge = maxAge
    self.keyPrefix = prefix
  }

  package var policy: CachePolicy { CachePolicy(maxAge: maxAge) }

  public var identifier: String {
    "cache(\(cacheStore.name),maxAge=\(maxAge.map { "\($0)" } ?? "headers"),prefix=\(keyPrefix))"
  }

  /// The checkpoint work is done by the executor; running the stage hands the value on, as the
  /// store prepared it (see ``CacheStore/prepare(_:context:)``).
  public func process(_ input: Value, context: StageContext) async throws -> Value {
    try await cacheStore.prepare(input, context: context) as? Value ?? input
  }

  /// A checkpoint is never queued behind other work.
  public func resource(for input: Value) -> StageResource { .light }
}

/// Builds ``Cache`` stages for the `cache` kind, whatever value flows at their place; refuses a
/// place whose value the store cannot keep (a disk store before `decode`, say).
package struct CacheFactory: PassThroughStageFactory {
  public var store: any CacheStore
  public var maxAge: Duration?
  public var prefix: String

  public init(store: any CacheStore, maxAge: Duration?, prefix: String) {
    self.store = store
    self.maxAge = maxAge
    self.prefix = prefix
  }

  public func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage {
    guard store.accepts(type) else {
      throw PipelineError(
        .invalidDefinition,
        "the \(store.name) store cannot keep \(valueDescription(of: type)); it keeps \(store.keeps): move this cache stage")
    }
    return AnyStage(Cache<Value>(store: store, maxAge: maxAge, prefix: prefix))
  }
}

extension AnyStage {
  /// The store of a `cache` stage (any `CheckpointStage`), or `nil` for other stages.
  ///
  /// ```swift
  /// let stores = graph.stages.compactMap(\.checkpointStore)   // what `darkroom cache stats` reads
  /// ```
  public var checkpointStore: (any CacheStore)? { (base as? any CheckpointStage)?.cacheStore }
}
