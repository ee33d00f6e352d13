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
///
/// ```swift
/// let broken = Pipeline(name: "broken") { FailingStage<Int>(PipelineError(.stageFailed, "always")) }
/// let result = await broken.run(1).result   // .failure, with code .stageFailed
/// ```
public struct FailingStage<Value: Sendable>: Stage {
  public static var kind: String { "fail" }
  public let error: any Error & Sendable
  public init(_ error: any Error & Sendable) { self.error = error }
  public var identifier: String { "fail" }
  public func process(_ input: Value, context: StageContext) async throws -> Value { throw error }
}

/// A stage that waits until it is released (or cancelled), to test cancellation and timeouts
/// without sleeping.
///
/// ```swift
/// let gate = Gate()
/// let operation = Pipeline(name: "held") { GateStage<Int>(gate) }.run(1)
/// await gate.entered()   // the stage is waiting at the gate
/// operation.cancel()     // ends it as cancelled, without any sleep
/// ```
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
///
/// ```swift
/// let gate = Gate()
/// let operation = Pipeline(name: "held") { GateStage<Int>(gate) }.run(1)
/// await gate.entered()   // the stage is waiting at the gate
/// gate.open()            // now it goes on
/// ```
public final class Gate: Sendable {
  /// Opened when a stage first reaches the gate.
  private let reached = Latch()
  private let opened = Latch()

  public init() {}

  /// Lets every waiter through, now and later.
  public func open() { opened.open() }

  /// Suspends until the gate a stage waits on has been reached.
  public func entered() async { await reached.wait() }

  func markEntered() { reached.open() }

  /// Waits until the gate opens (marking the gate as reached, see ``entered()``); throws
  /// `CancellationError` if the task is cancelled first.
  public func wait() async throws {
    markEntered()
    try await opened.waitUnlessCancelled()
  }
}
