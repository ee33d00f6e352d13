import DarkroomCore

/// Admission control: at most `limit` holders at once and `queue` waiting; a caller beyond both
/// is refused at once with `overloaded` (a 429), so memory never grows with a burst.
///
/// Waiters are served first come, first served (a ResourceClass with a bounded queue). A
/// waiter whose task is cancelled (its client hung up) leaves the queue at once.
///
/// ```swift
/// let gate = AdmissionGate(limit: 2, queue: 8)
/// let answer = try await gate.admitted { try await render() }   // throws overloaded when full
/// ```
public final class AdmissionGate: Sendable {
  /// Holders at once.
  public let limit: Int
  /// Callers that may wait for a place.
  public let queue: Int
  private let slots: ResourceClass

  /// A gate for `limit` holders (at least 1) and `queue` waiters (at least 0).
  public init(limit: Int, queue: Int) {
    self.limit = max(1, limit)
    self.queue = max(0, queue)
    slots = ResourceClass(name: "renders", limit: self.limit)
  }

  /// Holders now.
  public var holders: Int { slots.running }
  /// Waiters now.
  public var waiting: Int { slots.waiting }

  /// Runs `body` once admitted; throws `overloaded` when the gate and its queue are full, and
  /// `cancelled` when the task is cancelled while waiting.
  public func admitted<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    do {
      try await slots.acquire(PriorityTicket(.normal), maxWaiting: queue)
    } catch is ResourceClass.QueueFull {
      throw PipelineError(
        .overloaded, "the server is at its limit: \(limit) renders running and \(queue) waiting; try again later")
    } catch {
      throw PipelineError(.cancelled, "the request was cancelled while waiting")
    }
    defer { slots.release() }
    return try await body()
  }
}
