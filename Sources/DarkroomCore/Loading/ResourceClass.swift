import Foundation

/// A kind of resource with a bound on how much work uses it at once — network transfers, CPU
/// work, disk I/O — and a queue ordered by priority, then by when it was asked for (its ticket's order).
///
/// ``run(_:_:)`` waits for a slot (suspended, not blocking a thread), runs the work, and frees the
/// slot. The limit is never exceeded (``peak`` records the most ever running), a waiter that is
/// cancelled leaves the queue at once, and a ``PriorityTicket`` changed while its work waits moves
/// that work in the queue.
///
/// ```swift
/// let network = ResourceClass(name: "network", limit: 8)
/// let data = try await network.run(PriorityTicket(.high)) { try await transport.fetch(source) }
/// ```
package final class ResourceClass: @unchecked Sendable {
  /// The class's name (`network`, `cpu`, `disk`).
  public let name: String
  private let lock = NSLock()
  private var maximum: Int  // guarded by `lock`
  private var active = 0  // guarded by `lock`
  private var highest = 0  // guarded by `lock`
  private var sequence: UInt64 = 0  // guarded by `lock`
  /// Waiting work by priority, each ordered by ticket order.
  private var queues: [LoadPriority: [Waiter]] = [:]  // guarded by `lock`
  /// Waiters cancelled before they were queued (the handler ran first).
  private var cancelledEarly: Set<UInt64> = []  // guarded by `lock`
  /// Waiters that have an id but are neither queued nor admitted yet.
  private var arriving: Set<UInt64> = []  // guarded by `lock`

  private struct Waiter {
    let id: UInt64
    let order: UInt64
    let continuation: CheckedContinuation<Void, any Error>
  }

  public init(name: String, limit: Int) {
    self.name = name
    maximum = max(1, limit)
  }

  /// How much work may run at once; raising it starts waiting work at once.
  public var limit: Int {
    get { lock.withLock { maximum } }
    set {
      let started = lock.withLock { () -> [CheckedContinuation<Void, any Error>] in
        maximum = max(1, newValue)
        return admitLocked()
      }
      for continuation in started { continuation.resume() }
    }
  }

  /// Work running now.
  public var running: Int { lock.withLock { active } }
  /// The most work that ever ran at once.
  public var peak: Int { lock.withLock { highest } }
  /// Work waiting for a slot.
  public var waiting: Int { lock.withLock { queues.values.reduce(0) { $0 + $1.count } } }

  /// Waits for a slot at `ticket`'s priority, runs `work`, frees the slot.
  public func run<T: Sendable>(_ ticket: PriorityTicket, _ work: () async throws -> T) async throws -> T {
    try await acquire(ticket)
    defer { release() }
    return try await work()
  }

  /// Waits for a slot; every successful call must be matched by one ``release()``.
  public func acquire(_ ticket: PriorityTicket) async throws {
    try Task.checkCancellation()
    let id: UInt64 = lock.withLock {
      sequence += 1
      arriving.insert(sequence)
      return sequence
    }
    let observation = ticket.observe { [weak self] priority in self?.move(id, to: priority) }
    defer { ticket.stopObserving(observation) }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let outcome = lock.withLock { () -> Bool? in
          arriving.remove(id)
          if cancelledEarly.remove(id) != nil { return nil }
          if active < maximum && queues.values.allSatisfy(\.isEmpty) {
            take()
            return true
          }
          enqueue(Waiter(id: id, order: ticket.order, continuation: continuation), at: ticket.priority)
          return false
        }
        switch outcome {
        case nil: continuation.resume(throwing: CancellationError())
        case true?: continuation.resume()
        case false?: break
        }
      }
    } onCancel: {
      cancel(id)
    }
  }

  /// Frees a slot taken by ``acquire(_:)`` and starts the next waiter.
  public func release() {
    let started = lock.withLock { () -> [CheckedContinuation<Void, any Error>] in
      active -= 1
      return admitLocked()
    }
    for continuation in started { continuation.resume() }
  }

  private func take() {
    active += 1
    highest = max(highest, active)
  }

  /// Admits waiters while there is room: highest priority first, then earliest.
  private func admitLocked() -> [CheckedContinuation<Void, any Error>] {
    var started: [CheckedContinuation<Void, any Error>] = []
    while active < maximum {
      guard let priority = LoadPriority.allCases.reversed().first(where: { !(queues[$0]?.isEmpty ?? true) }),
        let waiter = queues[priority]?.removeFirst()
      else { break }
      take()
      started.append(waiter.continuation)
    }
    return started
  }

  /// Takes a cancelled waiter out of the queue — or, if it is not queued yet, makes sure it never
  /// will be. (One that already holds a slot keeps it; its work sees the cancellation.)
  private func cancel(_ id: UInt64) {
    let cancelled = lock.withLock { () -> CheckedContinuation<Void, any Error>? in
      for priority in LoadPriority.allCases {
        if let index = queues[priority]?.firstIndex(where: { $0.id == id }) {
          return queues[priority]?.remove(at: index).continuation
        }
      }
      if arriving.contains(id) { cancelledEarly.insert(id) }
      return nil
    }
    cancelled?.resume(throwing: CancellationError())
  }

  private func move(_ id: UInt64, to priority: LoadPriority) {
    lock.withLock {
      for current in LoadPriority.allCases where current != priority {
        guard let index = queues[current]?.firstIndex(where: { $0.id == id }), let waiter = queues[current]?.remove(at: index)
        else { continue }
        enqueue(waiter, at: priority)
        return
      }
    }
  }

  /// Queues `waiter` behind every waiter of its priority asked for before it (by ticket order).
  private func enqueue(_ waiter: Waiter, at priority: LoadPriority) {
    var queue = queues[priority, default: []]
    queues[priority] = nil  // keep the array uniquely referenced while inserting
    var low = 0
    var high = queue.count
    if let last = queue.last, last.order <= waiter.order {
      low = high  // the usual case: asked last, queued last
    }
    while low < high {
      let middle = (low + high) / 2
      if queue[middle].order <= waiter.order { low = middle + 1 } else { high = middle }
    }
    queue.insert(waiter, at: low)
    queues[priority] = queue
  }
}
