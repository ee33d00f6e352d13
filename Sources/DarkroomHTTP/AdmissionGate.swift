import DarkroomCore

/// Admission control: at most `limit` holders at once and `queue` waiting; a caller beyond both
/// is refused at once with `overloaded` (a 429), so memory never grows with a burst.
///
/// Waiters are served first come, first served. A waiter whose task is cancelled (its client hung
/// up) leaves the queue at once and throws `cancelled`.
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

  private struct State {
    var holders = 0
    var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    var nextID: UInt64 = 0
    /// Waiters between their decision to wait and their registration, and those of them
    /// cancelled in that window.
    var arriving: Set<UInt64> = []
    var cancelledEarly: Set<UInt64> = []
  }
  private let state = Protected(State())
  private let onDepthChange: @Sendable (Int) -> Void

  /// A gate for `limit` holders and `queue` waiters (both at least 0; `limit` at least 1).
  public init(limit: Int, queue: Int, onDepthChange: @escaping @Sendable (Int) -> Void = { _ in }) {
    self.limit = max(1, limit)
    self.queue = max(0, queue)
    self.onDepthChange = onDepthChange
  }

  /// Holders now.
  public var holders: Int { state.withLock { $0.holders } }
  /// Waiters now.
  public var waiting: Int { state.withLock { $0.waiters.count } }

  /// Runs `body` once admitted; throws `overloaded` when the gate and its queue are full, and
  /// `cancelled` when the task is cancelled while waiting.
  public func admitted<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    try await enter()
    defer { leave() }
    return try await body()
  }

  private func enter() async throws {
    enum Decision {
      case admitted
      case wait(UInt64)
      case refused
    }
    let decision: Decision = state.withLock { state in
      if state.holders < limit {
        state.holders += 1
        return .admitted
      }
      guard state.waiters.count + state.arriving.count < queue else { return .refused }
      state.nextID += 1
      state.arriving.insert(state.nextID)
      return .wait(state.nextID)
    }
    switch decision {
    case .admitted: return
    case .refused:
      throw PipelineError(
        .overloaded, "the server is at its limit: \(limit) renders running and \(queue) waiting; try again later")
    case .wait(let id):
      try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
          let depth: Int? = state.withLock { state in
            state.arriving.remove(id)
            if state.cancelledEarly.remove(id) != nil { return nil }
            state.waiters.append((id, continuation))
            return state.waiters.count
          }
          if let depth { onDepthChange(depth) } else { continuation.resume(throwing: Self.cancelled()) }
        }
      } onCancel: {
        let removed: (CheckedContinuation<Void, any Error>, Int)? = state.withLock { state in
          guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
            // Not registered yet: it leaves as it arrives. Already admitted: nothing to do.
            if state.arriving.contains(id) { state.cancelledEarly.insert(id) }
            return nil
          }
          return (state.waiters.remove(at: index).continuation, state.waiters.count)
        }
        if let (continuation, depth) = removed {
          onDepthChange(depth)
          continuation.resume(throwing: Self.cancelled())
        }
      }
    }
  }

  private func leave() {
    let next: (CheckedContinuation<Void, any Error>, Int)? = state.withLock { state in
      guard !state.waiters.isEmpty else {
        state.holders -= 1
        return nil
      }
      // The place passes to the first waiter: holders stay the same.
      return (state.waiters.removeFirst().continuation, state.waiters.count)
    }
    if let (continuation, depth) = next {
      onDepthChange(depth)
      continuation.resume()
    }
  }

  private static func cancelled() -> PipelineError { PipelineError(.cancelled, "the request was cancelled while waiting") }
}
