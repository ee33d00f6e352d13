import Foundation

/// A weak registry of live objects (CZSharedImage's idea, for servers): two requests for the same
/// key share one object while anyone still holds it. Not a cache — nothing is kept alive by it.
///
/// Concurrent requests for a key whose object is being created wait for that one creation
/// instead of starting their own. A failed creation is not remembered; the next request tries
/// again. A waiter that is cancelled stops waiting; the creation goes on for the others.
///
/// ```swift
/// let registry = LiveObjectRegistry<String, Thumbnail>()
/// let a = try await registry.object(for: "a.jpg") { try await makeThumbnail("a.jpg") }
/// let b = try await registry.object(for: "a.jpg") { try await makeThumbnail("a.jpg") }  // a === b
/// ```
package final class LiveObjectRegistry<Key: Hashable & Sendable, Object: AnyObject & Sendable>: Sendable {
  private final class WeakBox {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
  }

  private struct State {
    var live: [Key: WeakBox] = [:]
    var creating: [Key: Task<Object, any Error>] = [:]
    var insertionsSincePrune = 0

    mutating func prune() {
      live = live.filter { $0.value.object != nil }
      insertionsSincePrune = 0
    }
  }

  private let state = Protected(State())

  public init() {}

  /// The live object for `key`, or the one being created for it, or a new one from `create`.
  public func object(for key: Key, create: @escaping @Sendable () async throws -> Object) async throws -> Object {
    let found = state.withLock { state -> (object: Object?, task: Task<Object, any Error>?, isCreator: Bool) in
      if let object = state.live[key]?.object { return (object, nil, false) }
      if let pending = state.creating[key] { return (nil, pending, false) }
      let task = Task { try await create() }
      state.creating[key] = task
      return (nil, task, true)
    }
    if let object = found.object { return object }
    guard let task = found.task else { throw CancellationError() }
    guard found.isCreator else { return try await task.value }
    do {
      let object = try await task.value
      register(object, for: key)
      return object
    } catch {
      state.withLock { $0.creating[key] = nil }
      throw error
    }
  }

  private func register(_ object: Object, for key: Key) {
    state.withLock { state in
      state.live[key] = WeakBox(object)
      state.creating[key] = nil
      state.insertionsSincePrune += 1
      if state.insertionsSincePrune >= 256 { state.prune() }
    }
  }

  /// The live object for `key`, if one is alive.
  public func existing(for key: Key) -> Object? { state.withLock { $0.live[key]?.object } }

  /// How many objects are alive (entries whose objects are gone are dropped).
  public var liveCount: Int {
    state.withLock { state in
      state.prune()
      return state.live.count
    }
  }
}
