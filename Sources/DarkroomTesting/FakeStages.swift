import DarkroomCore
import Foundation

/// A stage made of a closure, for tests and quick experiments.
///
/// ```swift
/// let double = ClosureStage<Int, Int>(identifier: "double") { value, _ in value * 2 }
/// ```
public struct ClosureStage<Input: Sendable, Output: Sendable>: Stage {
  public static var kind: String { "closure" }
  public let identifier: String
  private let body: @Sendable (Input, StageContext) async throws -> Output

  public init(identifier: String, _ body: @escaping @Sendable (Input, StageContext) async throws -> Output) {
    self.identifier = identifier
    self.body = body
  }

  public func process(_ input: Input, context: StageContext) async throws -> Output { try await body(input, context) }
}

/// A stage that always fails with the given error.
public struct FailingStage<Value: Sendable>: Stage {
  public static var kind: String { "fail" }
  public let error: any Error & Sendable
  public init(_ error: any Error & Sendable) { self.error = error }
  public var identifier: String { "fail" }
  public func process(_ input: Value, context: StageContext) async throws -> Value { throw error }
}

/// A stage that waits until it is released (or cancelled), to test cancellation and timeouts
/// without sleeping.
public struct GateStage<Value: Sendable>: Stage {
  public static var kind: String { "gate" }
  public let gate: Gate
  public init(_ gate: Gate) { self.gate = gate }
  public var identifier: String { "gate" }
  public func process(_ input: Value, context: StageContext) async throws -> Value {
    gate.markEntered()
    try await gate.wait()
    return input
  }
}

/// A one-shot latch tasks can wait on; cancellation-aware.
public final class Gate: Sendable {
  private struct State {
    var open = false
    var entered = false
    var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    var enteredWaiters: [CheckedContinuation<Void, Never>] = []
    var next: UInt64 = 0
    var cancelled: Set<UInt64> = []
  }
  private let state = Locked(State())

  public init() {}

  /// Lets every waiter through, now and later.
  public func open() {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
      state.open = true
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Suspends until the gate a stage waits on has been reached.
  public func entered() async {
    await withCheckedContinuation { continuation in
      let now = state.withLock { state -> Bool in
        if state.entered { return true }
        state.enteredWaiters.append(continuation)
        return false
      }
      if now { continuation.resume() }
    }
  }

  func markEntered() {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.entered = true
      defer { state.enteredWaiters = [] }
      return state.enteredWaiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Waits until the gate opens (marking the gate as reached, see ``entered()``); throws
  /// `CancellationError` if the task is cancelled first.
  public func wait() async throws {
    markEntered()
    let id = state.withLock { state -> UInt64 in
      state.next += 1
      return state.next
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let outcome = state.withLock { state -> Bool? in
          if state.cancelled.remove(id) != nil { return false }
          if state.open { return true }
          state.waiters[id] = continuation
          return nil
        }
        switch outcome {
        case true?: continuation.resume()
        case false?: continuation.resume(throwing: CancellationError())
        case nil: break
        }
      }
    } onCancel: {
      let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
        guard let waiter = state.waiters.removeValue(forKey: id) else {
          state.cancelled.insert(id)
          return nil
        }
        return waiter
      }
      waiter?.resume(throwing: CancellationError())
    }
  }
}
