import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

struct Oops: Error, Sendable {}

@Suite("Executor and operations")
struct ExecutorTests {
  let double = ClosureStage<Int, Int>(identifier: "double") { value, _ in value * 2 }
  let describe = ClosureStage<Int, String>(identifier: "describe") { value, _ in "value \(value)" }

  @Test("runs stages in order and emits the lifecycle in order")
  func eventsInOrder() async throws {
    let observer = RecordingObserver()
    let pipeline = Pipeline(name: "numbers") {
      double
      double
      describe
    }
    let operation = pipeline.run(5, options: RunOptions(observers: [observer]))
    #expect(try await operation.value == "value 20")
    #expect(operation.status == .finished)
    #expect(
      observer.names == [
        "started", "stageStarted", "stageFinished", "stageStarted", "stageFinished", "stageStarted", "stageFinished",
        "willFinish", "finished",
      ])
    var streamed: [String] = []
    for await event in operation.events { streamed.append(event.name) }  // replays, then ends
    #expect(streamed == observer.names)
  }

  @Test("a failing stage fails the operation with the stage attributed")
  func failureAttribution() async {
    let pipeline = Pipeline(name: "f") {
      double
      FailingStage<Int>(PipelineError(.corruptImage, "broken pixels"))
    }
    let result = await pipeline.run(1).result
    guard case .failure(let error) = result else {
      Issue.record("succeeded")
      return
    }
    #expect(error.code == .corruptImage)
    #expect(error.stageKind == "fail")
    let other = await Pipeline(name: "g") { FailingStage<Int>(Oops()) }.run(1).result
    guard case .failure(let wrapped) = other else {
      Issue.record("succeeded")
      return
    }
    #expect(wrapped.code == .stageFailed)
    #expect(wrapped.message.hasPrefix("stage \"fail\" failed"))
    #expect(wrapped.cause is Oops)
  }

  @Test("a throwing willFinish hook fails the operation before the result is visible")
  func willFinishHookFails() async {
    let observer = RecordingObserver()
    var options = RunOptions(observers: [observer])
    let seen = Protected<[Int]>([])
    options.onWillFinish { (value: Int, _: OperationInfo) in
      seen.withLock { $0.append(value) }
      throw Oops()
    }
    let operation = Pipeline(name: "h") { double }.run(21, options: options)
    let result = await operation.result
    guard case .failure(let error) = result else {
      Issue.record("succeeded")
      return
    }
    #expect(error.code == .willFinishFailed)
    #expect(seen.withLock { $0 } == [42])
    #expect(observer.names == ["started", "stageStarted", "stageFinished", "willFinish", "failed"])
  }

  @Test("cancelling a running operation ends it with exactly one cancelled event")
  func cancellation() async {
    let gate = Gate()
    let observer = RecordingObserver()
    let operation = Pipeline(name: "c") {
      double
      GateStage<Int>(gate)
    }.run(1, options: RunOptions(observers: [observer], timeout: nil))
    await gate.entered()
    operation.cancel()
    let result = await operation.result
    guard case .failure(let error) = result else {
      Issue.record("succeeded")
      return
    }
    #expect(error.code == .cancelled)
    #expect(operation.status == .cancelled)
    #expect(observer.events.filter(\.isTerminal).count == 1)
    #expect(observer.names.last == "cancelled")
    operation.cancel()  // again: nothing changes
    #expect(observer.events.filter(\.isTerminal).count == 1)
  }

  @Test("an operation over its time limit fails with timedOut")
  func timeout() async {
    let gate = Gate()
    let operation = Pipeline(name: "t") { GateStage<Int>(gate) }.run(1, options: RunOptions(timeout: .milliseconds(50)))
    let result = await operation.result
    guard case .failure(let error) = result else {
      Issue.record("succeeded")
      return
    }
    #expect(error.code == .timedOut)
    #expect(operation.status == .failed)
  }

  @Test("the time limit covers willFinish hooks")
  func timeoutCoversHooks() async {
    let gate = Gate()
    var options = RunOptions(timeout: .milliseconds(50))
    options.onWillFinish { (_: Int, _: OperationInfo) in try await gate.wait() }
    let result = await Pipeline(name: "slow-hook") { double }.run(1, options: options).result
    guard case .failure(let error) = result else {
      Issue.record("succeeded")
      return
    }
    #expect(error.code == .timedOut)
  }

  @Test("a pipeline loaded untyped can be checked into a typed one")
  func typedFromGraph() throws {
    let graph = try StageGraph(name: "g", stages: [AnyStage(double), AnyStage(describe)])
    _ = try Pipeline<Int, String>(graph)
    #expect(throws: PipelineError.self) { try Pipeline<String, Int>(graph) }
    #expect(throws: PipelineError.self) { try StageGraph(name: "bad", stages: [AnyStage(describe), AnyStage(double)]) }
  }
}

@Suite("Blocking pool")
struct BlockingPoolTests {
  @Test("never runs more items at once than it has threads")
  func bounded() async throws {
    let pool = BlockingPool(threads: 3, name: "test.bounded")
    let running = Protected(0)
    let peak = Protected(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<40 {
        group.addTask {
          try await pool.run {
            let now = running.withLock { value -> Int in
              value += 1
              return value
            }
            peak.withLock { $0 = max($0, now) }
            // Some real work so items overlap.
            var sum = 0
            for i in 0..<200_000 { sum &+= i }
            running.withLock { $0 -= 1 }
            _ = sum
          }
        }
      }
      try await group.waitForAll()
    }
    #expect(peak.withLock { $0 } <= 3)
    #expect(pool.peakConcurrency <= 3)
    #expect(pool.peakConcurrency >= 1)
  }

  @Test("work cancelled while queued never runs")
  func cancelledBeforeStart() async throws {
    let pool = BlockingPool(threads: 1, name: "test.cancel")
    let blocker = DispatchSemaphore(value: 0)
    let ran = Protected(false)
    let first = Task { try await pool.run { blocker.wait() } }
    // Wait until the only thread is busy.
    while pool.peakConcurrency == 0 { await Task.yield() }
    let second = Task { try await pool.run { ran.withLock { $0 = true } } }
    second.cancel()
    await #expect(throws: CancellationError.self) { try await second.value }
    blocker.signal()
    try await first.value
    // Run one more item so the cancelled one has certainly been dequeued.
    try await pool.run {}
    #expect(ran.withLock { $0 } == false)
  }
}
