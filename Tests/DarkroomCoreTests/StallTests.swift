import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

/// A stage that waits for a continuation it never hands to cancellation: it models a user stage
/// or a library call that ignores `Task.cancel()` and only ends when released.
private struct DeafStage: Stage {
  static var kind: String { "deaf" }
  /// Waited on without a cancellation handler: cancellation does not reach the stage.
  let latch: Latch
  var identifier: String { "deaf" }
  func process(_ input: Int, context: StageContext) async throws -> Int {
    await latch.wait()
    return input
  }
}

/// A stage whose blocking call never returns until a semaphore is signalled, like a C library
/// stuck in a read or a computation with no cancellation point.
private struct StuckCallStage: Stage {
  static var kind: String { "stuck" }
  let semaphore: DispatchSemaphore
  var identifier: String { "stuck" }
  func process(_ input: Int, context: StageContext) async throws -> Int {
    try await context.pool.run {
      semaphore.wait()
      return input
    }
  }
}

@Suite("Stalls end by the time limit", .timeLimit(.minutes(3)))
struct StallTests {
  @Test("an operation ends by its time limit even when a stage ignores cancellation")
  func deafStage() async throws {
    let latch = Latch()
    defer { latch.open() }
    let observer = RecordingObserver()
    let operation = Pipeline(name: "deaf") { DeafStage(latch: latch) }
      .run(1, options: RunOptions(observers: [observer], timeout: .milliseconds(100)))
    guard case .failure(let error) = await operation.result else {
      Issue.record("a stage that never returns finished")
      return
    }
    #expect(error.code == .timedOut)
    #expect(error.message.contains("the operation took longer than its"))
    #expect(operation.status == .failed)
    #expect(observer.names.filter { $0 == "failed" }.count == 1)
    #expect(!observer.names.contains("finished"))
  }

  @Test("a stage time limit fires while a blocking call is stuck; the pool thread serves again once the call returns")
  func stuckBlockingCall() async throws {
    let pool = BlockingPool(threads: 1, name: "stall-test")
    defer { pool.shutdown() }
    let semaphore = DispatchSemaphore(value: 0)
    var options = RunOptions(timeout: .seconds(30), stageTimeout: .milliseconds(100))
    options.pool = pool
    options.stageTimeouts = [:]
    let operation = Pipeline(name: "stuck") { StuckCallStage(semaphore: semaphore) }.run(7, options: options)
    guard case .failure(let error) = await operation.result else {
      Issue.record("a stuck call finished")
      semaphore.signal()
      return
    }
    #expect(error.code == .timedOut)
    #expect(error.message.contains("stage \"stuck\" took longer than its"))
    #expect(error.stageKind == "stuck")
    semaphore.signal()  // the call returns; its result is dropped
    var afterOptions = RunOptions()
    afterOptions.pool = pool
    let after = Pipeline(name: "after") {
      ClosureStage<Int, Int>(identifier: "inc") { value, context in
        try await context.pool.run { value + 1 }
      }
    }.run(1, options: afterOptions)
    #expect(try await after.value == 2)
  }

  @Test("cancelling an operation whose stage ignores cancellation ends it at once as cancelled")
  func cancelDeafStage() async throws {
    let latch = Latch()
    defer { latch.open() }
    let observer = RecordingObserver()
    let operation = Pipeline(name: "deaf") { DeafStage(latch: latch) }
      .run(1, options: RunOptions(observers: [observer], timeout: .seconds(30)))
    operation.cancel()
    let result = await operation.result
    guard case .failure(let error) = result else {
      Issue.record("a cancelled operation finished")
      return
    }
    #expect(error.code == .cancelled)
    #expect(operation.status == .cancelled)
  }
}

@Suite("Deadline scheduler", .timeLimit(.minutes(3)))
struct DeadlineSchedulerTests {
  @Test("deadlines fire in deadline order, on time or later, never before")
  func firesInOrder() async {
    let scheduler = DeadlineScheduler()
    let clock = ContinuousClock()
    let start = clock.now
    let fired = Protected<[(Int, Duration)]>([])
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      for (index, milliseconds) in [(3, 90), (1, 30), (2, 60)] {
        _ = scheduler.schedule(after: .milliseconds(milliseconds)) {
          let count = fired.withLock {
            $0.append((index, clock.now - start))
            return $0.count
          }
          if count == 3 { done.resume() }
        }
      }
    }
    let order = fired.value
    #expect(order.map(\.0) == [1, 2, 3])
    for (index, elapsed) in order { #expect(elapsed >= .milliseconds(30 * index)) }
    #expect(scheduler.pendingCount == 0)
  }

  @Test(
    "1,000 deadlines scheduled in random order while earlier ones wait, fire and are cancelled: every live one fires, none early")
  func randomOrder() async {
    let scheduler = DeadlineScheduler()
    let clock = ContinuousClock()
    let early = Protected(0)
    let plan = (0..<1_000).map { index in (delay: Duration.microseconds(Int.random(in: 0...40_000)), cancel: index % 3 == 0) }
    let live = plan.filter { !$0.cancel }.count
    let fired = Protected(0)
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      for (delay, cancel) in plan {
        let due = clock.now.advanced(by: delay)
        let token = scheduler.schedule(after: delay) {
          if clock.now < due { early.withLock { $0 += 1 } }
          if fired.withLock({
            $0 += 1
            return $0
          }) == live {
            done.resume()
          }
        }
        if cancel { scheduler.cancel(token) }
      }
    }
    #expect(early.value == 0)
    #expect(fired.value == live && scheduler.pendingCount == 0)
  }

  @Test("cancelled deadlines never fire and are not kept: 10,000 cancelled leave nothing behind")
  func cancelledAreDropped() async {
    let scheduler = DeadlineScheduler()
    let fired = Protected(0)
    let tokens = (0..<10_000).map { _ in scheduler.schedule(after: .seconds(60)) { fired.withLock { $0 += 1 } } }
    #expect(scheduler.pendingCount == 10_000)
    for token in tokens { scheduler.cancel(token) }
    #expect(scheduler.pendingCount == 0)
    #expect(scheduler.storedCount <= 64)
    // A deadline scheduled after them still fires: the cancelled ones do not block the thread.
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      _ = scheduler.schedule(after: .milliseconds(10)) { done.resume() }
    }
    #expect(fired.value == 0)
  }
}
