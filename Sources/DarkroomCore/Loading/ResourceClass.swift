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
package final class ResourceClass: Sendable {
  /// The class's name (`network`, `cpu`, `disk`).
  public let name: String
  private let state: Protected<State>

  private struct Waiter {
    let id: UInt64
    let order: UInt64
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var maximum: Int
    var active = 0
    var highest = 0
    var sequence: UInt64 = 0
    /// Waiting work by priority, each ordered by ticket order.
    var queues: [LoadPriority: [Waiter]] = [:]
    /// Waiters cancelled before they were queued (the handler ran first).
    var cancelledEarly: Set<UInt64> = []
    /// Waiters that have an id but are neither queued nor admitted yet.
    var arriving: Set<UInt64> = []

    mutating func take() {
      active += 1
      highest = max(highest, active)
    }

    /// Admits waiters while there is room: highest priority first, then earliest.
    mutating func admit() -> [CheckedContinuation<Void, any Error>] {
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

    /// Queues `waiter` behind every waiter of its priority asked for before it (by ticket order).
    mutating func enqueue(_ waiter: Waiter, at priority: LoadPriority) {
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

  public init(name: String, limit: Int) {
    self.name = name
    state = Protected(State(maximum: max(1, limit)))
  }

  /// How much work may run at once; raising it starts waiting work at once.
  public var limit: Int {
    get { state.withLock { $0.maximum } }
    set {
      let started = state.withLock { state in
        state.maximum = max(1, newValue)
        return state.admit()
      }
      for continuation in started { continuation.resume() }
    }
  }

  /// Work running now.
  public var running: Int { state.withLock { $0.active } }
  /// The most work that ever ran at once.
  public var peak: Int { state.withLock { $0.highest } }
  /// Work waiting for a slot.
  public var waiting: Int { state.withLock { $0.queues.values.reduce(0) { $0 + $1.count } } }

  /// Waits for a slot at `ticket`'s priority, runs `work`, frees the slot.
  public func run<T: Sendable>(_ ticket: PriorityTicket, _ work: () async throws -> T) async throws -> T {
    try await acquire(ticket)
    defer { release() }
    return try await work()
  }

  /// Thrown by ``acquire(_:maxWaiting:)`` when no slot is free and `maxWaiting` callers wait.
  package struct QueueFull: Error {}

  /// Waits for a slot; every successful call must be matched by one ``release()``. When no slot
  /// is free and `maxWaiting` callers already wait (or are about to), throws ``QueueFull`` at
  /// once instead of waiting.
  public func acquire(_ ticket: PriorityTicket, maxWaiting: Int = .max) async throws {
    try Task.checkCancellation()
    let id: UInt64? = state.withLock { state in
      let full = state.active >= state.maximum || state.queues.values.contains { !$0.isEmpty }
      if full, state.queues.values.reduce(state.arriving.count, { $0 + $1.count }) >= maxWaiting { return nil }
      state.sequence += 1
      state.arriving.insert(state.sequence)
      return state.sequence
    }
    guard let id else { throw QueueFull() }
    let observation = ticket.observe { [weak self] priority in self?.move(id, to: priority) }
    defer { ticket.stopObserving(observation) }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let outcome = state.withLock { state -> Bool? in
          state.arriving.remove(id)
          if state.cancelledEarly.remove(id) != nil { return nil }
          if state.active < state.maximum && state.queues.values.allSatisfy(\.isEmpty) {
            state.take()
            return true
          }
          state.enqueue(Waiter(id: id, order: ticket.order, continuation: continuation), at: ticket.priority)
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
    let started = state.withLock { state in
      state.active -= 1
      return state.admit()
    }
    for continuation in started { continuation.resume() }
  }

  /// Takes a cancelled waiter out of the queue — or, if it is not queued yet, makes sure it never
  /// will be. (One that already holds a slot keeps it; its work sees the cancellation.)
  private func cancel(_ id: UInt64) {
    let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
      for priority in LoadPriority.allCases {
        if let index = state.queues[priority]?.firstIndex(where: { $0.id == id }) {
          return state.queues[priority]?.remove(at: index).continuation
        }
      }
      if state.arriving.contains(id) { state.cancelledEarly.insert(id) }
      return nil
    }
    cancelled?.resume(throwing: CancellationError())
  }

  private func move(_ id: UInt64, to priority: LoadPriority) {
    state.withLock { state in
      for current in LoadPriority.allCases where current != priority {
        guard let index = state.queues[current]?.firstIndex(where: { $0.id == id }),
          let waiter = state.queues[current]?.remove(at: index)
        else { continue }
        state.enqueue(waiter, at: priority)
        return
      }
    }
  }
}
