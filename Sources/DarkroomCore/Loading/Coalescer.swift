import Foundation

/// Shares identical in-flight work: callers asking for a key whose work is running wait for that
/// run instead of starting their own.
///
/// The shared work runs at the highest priority of its waiters (its ``PriorityTicket`` follows
/// them as they come and go). A waiter that is cancelled stops waiting at once without disturbing
/// the others; the work itself is cancelled when its last waiter goes. Results are not kept:
/// once the work finishes, the next caller starts it again (keeping results is a cache's job).
///
/// ```swift
/// let transfers = Coalescer<String, FetchedData>()
/// let data = try await transfers.value(for: url, priority: .normal) { ticket in
///   try await network.run(ticket) { try await fetch(url) }
/// }
/// ```
public final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
  private final class Entry: @unchecked Sendable {  // guarded by the coalescer's lock
    let ticket: PriorityTicket
    var task: Task<Void, Never>?
    var waiters: [UUID: (priority: LoadPriority, continuation: CheckedContinuation<Value, any Error>)] = [:]
    var joined = 0
    init(ticket: PriorityTicket) { self.ticket = ticket }
  }

  private let lock = NSLock()
  private var entries: [Key: Entry] = [:]  // guarded by `lock`
  private var runs = 0  // guarded by `lock`
  /// Waiters between their cancellation check and joining, and those cancelled in that window.
  private var arriving: Set<UUID> = []  // guarded by `lock`
  private var cancelledEarly: Set<UUID> = []  // guarded by `lock`

  public init() {}

  /// Work running now.
  public var inFlight: Int { lock.withLock { entries.count } }
  /// How many times work was started (for tests and metrics: one per distinct run).
  public var started: Int { lock.withLock { runs } }
  /// How many callers wait for `key`'s work (0 when none runs).
  public func waiters(for key: Key) -> Int { lock.withLock { entries[key]?.waiters.count ?? 0 } }

  /// The result of the work for `key`: joins the running work, or starts `work` with a ticket
  /// carrying the waiters' highest priority.
  public func value(
    for key: Key, priority: LoadPriority = .normal, work: @escaping @Sendable (PriorityTicket) async throws -> Value
  ) async throws -> Value {
    try Task.checkCancellation()
    let waiter = UUID()
    _ = lock.withLock { arriving.insert(waiter) }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        let joined = lock.withLock { () -> Bool in
          arriving.remove(waiter)
          if cancelledEarly.remove(waiter) != nil { return false }
          if let entry = entries[key] {
            entry.waiters[waiter] = (priority, continuation)
            entry.joined += 1
            entry.ticket.priority = max(entry.ticket.priority, priority)
            return true
          }
          let entry = Entry(ticket: PriorityTicket(priority))
          entry.waiters[waiter] = (priority, continuation)
          entry.joined = 1
          entries[key] = entry
          runs += 1
          entry.task = Task { [weak self] in
            let result: Result<Value, any Error>
            do { result = .success(try await work(entry.ticket)) } catch { result = .failure(error) }
            self?.finish(key, entry: entry, with: result)
          }
          return true
        }
        if !joined { continuation.resume(throwing: CancellationError()) }
      }
    } onCancel: {
      leave(key, waiter: waiter)
    }
  }

  private func finish(_ key: Key, entry: Entry, with result: Result<Value, any Error>) {
    let waiting = lock.withLock { () -> [CheckedContinuation<Value, any Error>] in
      if entries[key] === entry { entries[key] = nil }
      defer { entry.waiters.removeAll() }
      return entry.waiters.values.map(\.continuation)
    }
    for continuation in waiting { continuation.resume(with: result) }
  }

  /// A waiter was cancelled: it stops waiting; the last one to go cancels the work.
  private func leave(_ key: Key, waiter: UUID) {
    let (continuation, cancelWork) = lock.withLock { () -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
      guard let entry = entries[key], let leaving = entry.waiters.removeValue(forKey: waiter) else {
        if arriving.contains(waiter) { cancelledEarly.insert(waiter) }
        return (nil, nil)
      }
      if entry.waiters.isEmpty {
        entries[key] = nil
        return (leaving.continuation, entry.task)
      }
      entry.ticket.priority = entry.waiters.values.map(\.priority).max() ?? .normal
      return (leaving.continuation, nil)
    }
    continuation?.resume(throwing: CancellationError())
    cancelWork?.cancel()
  }
}
