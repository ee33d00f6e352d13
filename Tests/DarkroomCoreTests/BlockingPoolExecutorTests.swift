import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

@Suite("A blocking pool as a task executor")
struct BlockingPoolExecutorTests {
  /// The calling thread's identity (on Linux, `pthread_t` is an integer).
  static func thread() -> pthread_t { pthread_self() }

  @Test("a task preferring the pool runs on its threads, and its blocking work runs in place")
  func runsInPlace() async throws {
    let pool = BlockingPool(threads: 2, name: "executor-test")
    defer { pool.shutdown() }
    let (outer, inner, onPool) = try await Task(executorPreference: pool) {
      let outer = Self.thread()
      let inner = try await pool.run { Self.thread() }
      return (outer, inner, BlockingPool.current === pool)
    }.value
    #expect(onPool)
    #expect(outer == inner)
    #expect(pool.peakConcurrency >= 1)
  }

  @Test("without the preference, blocking work hands over to a pool thread")
  func handsOver() async throws {
    let pool = BlockingPool(threads: 1, name: "executor-test")
    defer { pool.shutdown() }
    #expect(BlockingPool.current == nil)
    let onPool = try await pool.run { BlockingPool.current === pool }
    #expect(onPool)
    #expect(BlockingPool.current == nil)
  }

  @Test("work of another pool still goes to that pool, and the task comes back to its own")
  func otherPool() async throws {
    let cpu = BlockingPool(threads: 1, name: "executor-cpu")
    let io = BlockingPool(threads: 1, name: "executor-io")
    defer {
      cpu.shutdown()
      io.shutdown()
    }
    let (onIO, backOnCPU) = try await Task(executorPreference: cpu) {
      let onIO = try await io.run { BlockingPool.current === io }
      return (onIO, BlockingPool.current === cpu)
    }.value
    #expect(onIO && backOnCPU)
  }

  @Test("many tasks preferring a one-thread pool all finish, interleaving at their suspensions")
  func manyTasks() async throws {
    let pool = BlockingPool(threads: 1, name: "executor-test")
    defer { pool.shutdown() }
    let latch = Latch()
    let results = try await withThrowingTaskGroup(of: Int.self) { group in
      for index in 0..<50 {
        group.addTask(executorPreference: pool) {
          // Every task waits for one released by the last: none may hold the only thread.
          if index < 49 { await latch.wait() } else { latch.open() }
          return try await pool.run { index }
        }
      }
      return try await group.reduce(into: [Int]()) { $0.append($1) }
    }
    #expect(results.sorted() == Array(0..<50))
  }
}
