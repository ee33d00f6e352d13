import Foundation

/// Shares identical in-flight work: callers asking for a key whose work is running wait for that
/// run instead of starting their own.
///
/// The shared work runs at the highest priority of its waiters: its ``PriorityTicket`` follows
/// them as they come, go, or change their own tickets. A waiter that is cancelled stops waiting at
/// once without disturbing the others; the work itself is cancelled when its last waiter goes.
/// Results are not kept: once the work finishes, the next caller starts it again (keeping results
/// is a cache's job). When a result goes to more than one waiter, the optional `share` function
/// prepares it first (a lazily decoded image, which can be read only once, is made into one in
/// memory).
///
/// ```swift
/// let transfers = Coalescer<String, FetchedData>()
/// let data = try await transfers.value(for: url, priority: .normal) { ticket in
///   try await network.run(ticket) { try await fetch(url) }
/// }
/// ```
package final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private struct Waiter {
    let ticket: PriorityTicket
    let observation: LocalToken
    let continuation: CheckedContinuation<Delivery?, any Error>
    let position: Int
  }

  private final class Entry: @unchecked Sendable {  // guarded by the coalescer's `state` lock
    let ticket: PriorityTicket
    var task: Task<Void, Never>?
    var waiters: [LocalToken: Waiter] = [:]
    /// The callers that got the previous result together with the one that started this work:
    /// the work is not closed to newcomers until all of them have moved on.
    var cohort: Cohort?
    init(ticket: PriorityTicket) { self.ticket = ticket }

    func updatePriority() {
      guard let highest = waiters.values.map(\.ticket.priority).max() else { return }
      ticket.priority = highest
    }
  }

  private struct State {
    var entries: [Key: Entry] = [:]
    var runs = 0
    var joins = 0
    /// Waiters between their cancellation check and joining, and those cancelled in that window.
    var arriving: Set<LocalToken> = []
    var cancelledEarly: Set<LocalToken> = []
    /// The key each waiting caller waits for.
    var waiterKeys: [LocalToken: Key] = [:]
  }
  private let state = Protected(State())
  private let share: (@Sendable (Value, _ consumers: Int) async throws -> Value)?

  /// Creates a coalescer. `share` prepares a result that goes to several waiters.
  public init(share: (@Sendable (Value, _ consumers: Int) async throws -> Value)? = nil) {
    self.share = share
  }

  /// Work running now.
  public var inFlight: Int { state.withLock { $0.entries.count } }
  /// How many times work was started (for tests and metrics: one per distinct run).
  public var started: Int { state.withLock { $0.runs } }
  /// How many times a caller joined work that was already running.
  public var joined: Int { state.withLock { $0.joins } }
  /// How many callers wait for `key`'s work (0 when none runs).
  public func waiters(for key: Key) -> Int { state.withLock { $0.entries[key]?.waiters.count ?? 0 } }
  /// True while work for `key` runs.
  public func isRunning(_ key: Key) -> Bool { state.withLock { $0.entries[key] != nil } }

  /// The keys whose work is running (for tests and diagnostics).
  public var runningKeys: [Key] { state.withLock { Array($0.entries.keys) } }

  /// The result of the work for `key`: joins the running work, or starts `work` with a ticket
  /// carrying the waiters' highest priority.
  public func value(
    for key: Key, priority: LoadPriority = .normal, work: @escaping @Sendable (PriorityTicket) async throws -> Value
  ) async throws -> Value {
    try await value(for: key, ticket: PriorityTicket(priority), work: work)
  }

  /// Like ``value(for:priority:work:)``, with the waiter's priority read from `ticket` for as long
  /// as it waits (raising it raises the shared work's priority).
  public func value(
    for key: Key, ticket: PriorityTicket, work: @escaping @Sendable (PriorityTicket) async throws -> Value
  ) async throws -> Value {
    try await value(for: key, ticket: ticket, after: nil, work: work).value
  }

  /// A shared result: the position of the key joined, the value, and — when the result went to
  /// several callers — the ``Cohort`` to pass to the next call of each of them.
  public struct Delivery: Sendable {
    public let index: Int
    public let value: Value
    public let cohort: Cohort?
  }

  /// Joins or starts the work for `key`, as a step of a chain of shared work: `cohort` is what the
  /// caller's previous delivery carried (checked in by this call). `registered` learns at once
  /// whether this call started the work (`true`) or joined it.
  public func value(
    for key: Key, ticket: PriorityTicket, after cohort: Cohort?, registered: (@Sendable (_ started: Bool) -> Void)? = nil,
    work: @escaping @Sendable (PriorityTicket) async throws -> Value
  ) async throws -> Delivery {
    guard let delivery = try await wait(for: [key], ticket: ticket, cohort: cohort, registered: registered, work: work) else {
      throw CancellationError()
    }
    return delivery
  }

  /// Joins the first of `keys` whose work is running and returns its position in `keys` and its
  /// result; `nil` at once when none is running (then `cohort` is not checked in: the caller's
  /// next call does it). Used to skip ahead to the deepest shared work.
  public func joinFirstRunning(of keys: [Key], ticket: PriorityTicket, after cohort: Cohort? = nil) async throws -> Delivery? {
    guard !keys.isEmpty else { return nil }
    return try await wait(for: keys, ticket: ticket, cohort: cohort, registered: nil, work: nil)
  }

  private func wait(
    for keys: [Key], ticket: PriorityTicket, cohort: Cohort?, registered: (@Sendable (Bool) -> Void)?,
    work: (@Sendable (PriorityTicket) async throws -> Value)?
  ) async throws -> Delivery? {
    try Task.checkCancellation()
    let waiter = LocalToken()
    _ = state.withLock { $0.arriving.insert(waiter) }
    let observation = ticket.observe { [weak self] _ in self?.priorityChanged(waiter) }
    defer { ticket.stopObserving(observation) }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Delivery?, any Error>) in
        let outcome = state.withLock { state -> JoinOutcome in
          state.arriving.remove(waiter)
          if state.cancelledEarly.remove(waiter) != nil { return .cancelled }
          for (position, key) in keys.enumerated() {
            guard let entry = state.entries[key] else { continue }
            entry.waiters[waiter] = Waiter(
              ticket: ticket, observation: observation, continuation: continuation, position: position)
            state.waiterKeys[waiter] = key
            state.joins += 1
            entry.updatePriority()
            return .waiting(started: false)
          }
          guard let work, let key = keys.first else { return .nothingRunning }
          let entry = Entry(ticket: PriorityTicket(ticket.priority, order: ticket.order))
          entry.cohort = cohort
          entry.waiters[waiter] = Waiter(ticket: ticket, observation: observation, continuation: continuation, position: 0)
          state.entries[key] = entry
          state.waiterKeys[waiter] = key
          state.runs += 1
          entry.task = Task { [weak self] in
            let result: Result<Value, any Error>
            do { result = .success(try await work(entry.ticket)) } catch { result = .failure(error) }
            await self?.finish(key, entry: entry, with: result)
          }
          return .waiting(started: true)
        }
        if outcome != .nothingRunning { cohort?.checkIn() }
        if case .waiting(let started) = outcome { registered?(started) }
        switch outcome {
        case .waiting: break
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .nothingRunning: continuation.resume(returning: nil)
        }
      }
    } onCancel: {
      leave(waiter)
    }
  }

  private func finish(_ key: Key, entry: Entry, with result: Result<Value, any Error>) async {
    // Callers that got the previous result with this work's starter may be about to join it.
    await entry.cohort?.allMovedOn()
    // Removing the entry first closes it to newcomers, so the count of consumers is final.
    let waiting = state.withLock { state -> [Waiter] in
      if state.entries[key] === entry { state.entries[key] = nil }
      for waiter in entry.waiters.keys { state.waiterKeys[waiter] = nil }
      defer { entry.waiters.removeAll() }
      return Array(entry.waiters.values)
    }
    var result = result
    if waiting.count > 1, let share, case .success(let value) = result {
      do { result = .success(try await share(value, waiting.count)) } catch { result = .failure(error) }
    }
    let group = waiting.count > 1 ? CohortGroup(count: waiting.count) : nil
    for waiter in waiting {
      let cohort = group.map(Cohort.init)
      waiter.continuation.resume(with: result.map { Delivery(index: waiter.position, value: $0, cohort: cohort) })
    }
  }

  private func priorityChanged(_ waiter: LocalToken) {
    state.withLock { state in
      guard let key = state.waiterKeys[waiter] else { return }
      state.entries[key]?.updatePriority()
    }
  }

  /// A waiter was cancelled: it stops waiting; the last one to go cancels the work.
  private func leave(_ waiter: LocalToken) {
    let (continuation, cancelWork) = state.withLock { state -> (CheckedContinuation<Delivery?, any Error>?, Task<Void, Never>?) in
      guard let key = state.waiterKeys.removeValue(forKey: waiter), let entry = state.entries[key],
        let leaving = entry.waiters.removeValue(forKey: waiter)
      else {
        if state.arriving.contains(waiter) { state.cancelledEarly.insert(waiter) }
        return (nil, nil)
      }
      if entry.waiters.isEmpty {
        state.entries[key] = nil
        return (leaving.continuation, entry.task)
      }
      entry.updatePriority()
      return (leaving.continuation, nil)
    }
    continuation?.resume(throwing: CancellationError())
    cancelWork?.cancel()
  }
}

private enum JoinOutcome: Equatable {
  case waiting(started: Bool)
  case cancelled, nothingRunning
}

/// One caller's membership of the group that received a shared result together. Work one of
/// the group starts next stays open to the others until each has made its next call (which checks
/// its membership in), so that a step finishing quickly is still shared with the callers that were
/// resumed a moment later.
///
/// A caller that makes no further call must ``checkIn()`` itself (when its run ends, fails or is
/// cancelled); checking in twice counts once.
package final class Cohort: Sendable {
  private let group: CohortGroup
  private let used = Protected(false)

  fileprivate init(_ group: CohortGroup) { self.group = group }

  /// This caller moved on.
  public func checkIn() {
    let first = used.withLock { used -> Bool in
      defer { used = true }
      return !used
    }
    guard first else { return }
    group.checkIn()
  }

  /// Waits until every member has checked in.
  func allMovedOn() async { await group.allMovedOn() }

  /// The members of a new group of `count` callers that start together (the variants of one
  /// source): the first work one of them starts stays open to the others until each has made its
  /// first call, so they share it however their tasks are scheduled. A member whose run ends
  /// without a call must ``checkIn()``; checking in again does nothing.
  ///
  /// ```swift
  /// let members = Cohort.members(variants.count)
  /// // give members[i] to variant i's load (ImageLoader.load(_:pipeline:…cohort:)); when all have ended:
  /// members.forEach { $0.checkIn() }
  /// ```
  public static func members(_ count: Int) -> [Cohort] {
    let group = CohortGroup(count: max(1, count))
    return (0..<max(1, count)).map { _ in Cohort(group) }
  }
}

private final class CohortGroup: Sendable {
  /// Members that have not checked in yet; everyone has moved on at zero.
  private let remaining: Waitable<Int>

  init(count: Int) { remaining = Waitable(count) }

  func checkIn() { remaining.withLock { $0 -= 1 } }

  func allMovedOn() async { await remaining.wait { $0 <= 0 } }
}
