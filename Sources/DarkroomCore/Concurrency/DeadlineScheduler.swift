import Foundation
import HeapModule

/// Fires actions at deadlines, for every time limit in the process, from one thread.
///
/// A time limit built on `Task.sleep` leaves its timer armed in Dispatch until the deadline even
/// when the sleep is cancelled: at 100 images a second with a 60-second limit that is ~6,000
/// dead timers (and their tasks), and memory grows with the rate. Here a cancelled deadline is
/// dropped at once, so what is kept is bounded by the operations in flight. Actions run on the
/// scheduler's thread and must be quick and must not block (resume a continuation, cancel a task).
///
/// ```swift
/// let token = DeadlineScheduler.shared.schedule(after: .seconds(60)) { race.stop(timedOut) }
/// DeadlineScheduler.shared.cancel(token)   // the work ended first
/// ```
package final class DeadlineScheduler: @unchecked Sendable {
  /// The scheduler every time limit of the executor uses.
  public static let shared = DeadlineScheduler()

  /// Identifies a scheduled action, for ``cancel(_:)``.
  public struct Token: Hashable, Sendable { fileprivate let id: UInt64 }

  private struct Entry: Comparable {
    var deadline: ContinuousClock.Instant
    var id: UInt64
    static func < (lhs: Entry, rhs: Entry) -> Bool { (lhs.deadline, lhs.id) < (rhs.deadline, rhs.id) }
  }

  // Guarded by `condition`'s lock (a pthread mutex, which ThreadSanitizer understands). Not a
  // `Protected`: the scheduler's thread sleeps on the condition until the next deadline.
  private let condition = NSCondition()
  private var heap = Heap<Entry>()
  private var actions: [UInt64: @Sendable () -> Void] = [:]
  private var nextID: UInt64 = 0
  private var started = false
  private let clock = ContinuousClock()

  /// Runs `action` on the scheduler's thread once `delay` has passed, unless cancelled first.
  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Token {
    condition.withLock {
      nextID += 1
      let id = nextID
      actions[id] = action
      heap.insert(Entry(deadline: clock.now.advanced(by: delay), id: id))
      if !started {
        started = true
        let thread = Thread { [self] in run() }
        thread.name = "darkroom.deadlines"
        thread.stackSize = 256 << 10
        thread.start()
      }
      // The thread sleeps until the earliest deadline (or, with none, until one comes): only a
      // new earliest deadline needs to wake it. A later one is seen when the thread next wakes,
      // for the earlier deadline it is waiting for (a cancelled entry stays in the heap until
      // then). Most limits are the same length and come later than the ones before them, so this
      // saves a wake-up of the thread, and two context switches, per operation.
      if heap.min?.id == id { condition.signal() }
      return Token(id: id)
    }
  }

  /// Drops a scheduled action; nothing happens if it already ran.
  public func cancel(_ token: Token) {
    condition.withLock {
      guard actions.removeValue(forKey: token.id) != nil else { return }
      // Cancelled entries stay in the heap until they surface; rebuild it when they are the
      // majority, so its size follows the live deadlines.
      if heap.count > 64 && heap.count > 2 * actions.count {
        heap = Heap(heap.unordered.filter { actions[$0.id] != nil })
      }
    }
  }

  /// Creates a scheduler; its thread starts with the first deadline.
  public init() {}

  /// The number of deadlines waiting to fire.
  public var pendingCount: Int { condition.withLock { actions.count } }

  /// The number of entries held, cancelled ones not yet dropped included (for tests: it stays
  /// within a small factor of ``pendingCount``).
  public var storedCount: Int { condition.withLock { heap.count } }

  private func run() {
    condition.lock()
    while true {
      guard let first = heap.min else {
        condition.wait()
        continue
      }
      guard actions[first.id] != nil else {
        _ = heap.removeMin()
        continue
      }
      let remaining = clock.now.duration(to: first.deadline)
      if remaining > .zero {
        let (seconds, attoseconds) = remaining.components
        _ = condition.wait(until: Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) * 1e-18))
        continue
      }
      _ = heap.removeMin()
      let action = actions.removeValue(forKey: first.id)
      condition.unlock()
      action?()
      condition.lock()
    }
  }
}
