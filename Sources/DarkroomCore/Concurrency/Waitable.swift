/// A value guarded by a lock that tasks can wait on: ``wait(until:)`` suspends until a condition
/// on the value holds. The package's one waiter idiom: instead of a lock-guarded list of
/// continuations that each mutation must remember to resume, every ``withLock(_:)`` re-checks
/// the waiting conditions and resumes (outside the lock) the tasks whose condition now holds.
///
/// A waiter whose condition already holds does not suspend. ``wait(until:)`` ignores
/// cancellation (for work that must see the state it waits for); ``waitUnlessCancelled(until:)``
/// stops waiting when its task is cancelled. Conditions run under the lock: keep them cheap and
/// free of side effects. ``Latch`` is the one-shot case.
///
/// ```swift
/// let pending = Waitable(0)
/// pending.withLock { $0 += 1 }                   // work posted
/// Task { pending.withLock { $0 -= 1 } }          // work done: wakes the waiter below
/// await pending.wait { $0 == 0 }
/// ```
package final class Waitable<Value>: Sendable {
  private struct Waiter {
    let condition: @Sendable (Value) -> Bool
    /// Resumed with true when the condition holds, false when the wait was cancelled.
    let continuation: CheckedContinuation<Bool, Never>
  }

  private struct Storage {
    var value: Value
    var waiters: [UInt64: Waiter] = [:]
    var nextWaiter: UInt64 = 0

    /// Removes and returns the waiters whose condition holds now.
    mutating func satisfied() -> [CheckedContinuation<Bool, Never>] {
      guard !waiters.isEmpty else { return [] }
      var ready: [CheckedContinuation<Bool, Never>] = []
      for (id, waiter) in waiters where waiter.condition(value) {
        ready.append(waiter.continuation)
        waiters[id] = nil
      }
      return ready
    }
  }

  private let storage: Protected<Storage>

  package init(_ value: Value) { storage = Protected(Storage(value: value)) }

  /// Runs `body` with exclusive access to the value, then resumes every waiter whose condition
  /// the value now meets (also when `body` throws).
  package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
    var ready: [CheckedContinuation<Bool, Never>] = []
    defer { for waiter in ready { waiter.resume(returning: true) } }
    return try storage.withLock { (storage: inout Storage) throws(Failure) -> Result in
      defer { ready = storage.satisfied() }
      return try body(&storage.value)
    }
  }

  /// A copy of the value as it is now.
  package var value: Value { storage.withLock { $0.value } }

  /// Returns once `condition` holds for the value: at once if it does now, else after the
  /// ``withLock(_:)`` that makes it hold. Cancelling the task does not end the wait.
  package func wait(until condition: @escaping @Sendable (Value) -> Bool) async {
    _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      enqueue(continuation, until: condition, cancellable: false)
    }
  }

  /// Returns once `condition` holds for the value, like ``wait(until:)``; throws
  /// `CancellationError` as soon as the task is cancelled (or at once if it already is, whatever
  /// the value).
  package func waitUnlessCancelled(until condition: @escaping @Sendable (Value) -> Bool) async throws(CancellationError) {
    let id = storage.withLock { storage -> UInt64 in
      storage.nextWaiter += 1
      return storage.nextWaiter
    }
    let reached = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        enqueue(continuation, until: condition, cancellable: true, id: id)
      }
    } onCancel: {
      // Not queued yet: `enqueue` then sees `Task.isCancelled` under the lock and does not queue it.
      storage.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: false)
    }
    guard reached else { throw CancellationError() }
  }

  private func enqueue(
    _ continuation: CheckedContinuation<Bool, Never>, until condition: @escaping @Sendable (Value) -> Bool,
    cancellable: Bool, id: UInt64? = nil
  ) {
    let now = storage.withLock { storage -> Bool? in
      if cancellable, Task.isCancelled { return false }
      if condition(storage.value) { return true }
      let key: UInt64
      if let id {
        key = id
      } else {
        storage.nextWaiter += 1
        key = storage.nextWaiter
      }
      storage.waiters[key] = Waiter(condition: condition, continuation: continuation)
      return nil
    }
    if let now { continuation.resume(returning: now) }
  }
}
