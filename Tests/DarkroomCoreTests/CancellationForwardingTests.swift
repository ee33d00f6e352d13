import DarkroomTesting
import Foundation
import Testing

@testable import DarkroomCore

/// A task awaiting an operation's `value` that is cancelled stops waiting, and cancels the
/// operation when nobody else waits for it.
@Suite("Cancellation forwards from the waiting task", .timeLimit(.minutes(3)))
struct CancellationForwardingTests {
  @Test("a cancelled waiter cancels an operation no other task waits for")
  func lastWaiterCancels() async throws {
    let gate = Gate()
    let operation = Pipeline(name: "gated") { GateStage<Int>(gate) }.run(1)
    let waiter = Task { await operation.result }
    await gate.entered()
    waiter.cancel()
    let result = await waiter.value
    #expect(result.failureCode == .cancelled)
    // The operation itself ends cancelled, its stage interrupted, with the gate never opened.
    #expect(await operation.result.failureCode == .cancelled)
    #expect(operation.status == .cancelled)
  }

  @Test("with another waiter, a cancelled waiter only stops waiting: the operation goes on for the other")
  func otherWaitersKeepIt() async throws {
    let gate = Gate()
    let operation = Pipeline(name: "gated") { GateStage<Int>(gate) }.run(7)
    let leaving = Task { await operation.result }
    let staying = Task { await operation.result }
    await gate.entered()
    await operation.whenWaited(by: 2)
    leaving.cancel()
    #expect(await leaving.value.failureCode == .cancelled)
    gate.open()
    #expect(try await staying.value.get() == 7)
    #expect(operation.status == .finished)
  }
}

extension Result where Failure == PipelineError {
  fileprivate var failureCode: PipelineError.Code? {
    if case .failure(let error) = self { return error.code }
    return nil
  }
}
