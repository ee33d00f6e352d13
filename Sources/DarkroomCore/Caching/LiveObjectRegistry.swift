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
package final class LiveObjectRegistry<Key: Hashable & Sendable, Object: AnyObject & Sendable>: @unchecked Sendable {
  private final class WeakBox {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
  }

  private let lock = NSLock()
  private var live: [Key: WeakBox] = [:]  // guarded by `lock`
  private var creating: [Key: Task<Object, any Error>] = [:]  // guarded by `lock`
  private var insertionsSincePrune = 0  // guarded by `lock`

  public init() {}

  /// The live object for `key`, or the one being created for it, or a new one from `create`.
  public func object(for key: Key, create: @escaping @Sendable () async throws -> Object) async throws -> Object {
    let found = lock.withLock { () -> (object: Object?, task: Task<Object, any Error>?, isCreator: Bool) in
      if let object = live[key]?.object { return (object, nil, false) }
      if let pending = creating[key] { return (nil, pending, false) }
      let task = Task { try await create() }
      creating[key] = task
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
      lock.withLock { creating[key] = nil }
      throw error
    }
  }

  private func register(_ object: Object, for key: Key) {
    lock.lock()
    defer { lock.unlock() }
    live[key] = WeakBox(object)
    creating[key] = nil
    insertionsSincePrune += 1
    if insertionsSincePrune >= 256 { pruneLocked() }
  }

  /// The live object for `key`, if one is alive.
  public func existing(for key: Key) -> Object? {
    lock.lock()
    defer { lock.unlock() }
    return live[key]?.object
  }

  /// How many objects are alive (entries whose objects are gone are dropped).
  public var liveCount: Int {
    lock.lock()
    defer { lock.unlock() }
    pruneLocked()
    return live.count
  }

  private func pruneLocked() {
    live = live.filter { $0.value.object != nil }
    insertionsSincePrune = 0
  }
}
