import Foundation
import Synchronization

/// A bounded pool of dedicated threads for blocking work: libvips evaluation, file I/O, C calls.
///
/// Swift's cooperative thread pool has one thread per core and must never block; Darkroom hands
/// every blocking call to a `BlockingPool` instead. Work waits in first-in first-out order; at most
/// ``threadCount`` items run at once. A task cancelled while its work is still queued gets
/// `CancellationError` at once and the work never runs; work already running finishes on its
/// thread, but the waiting task is released immediately with `CancellationError` and the result
/// is dropped.
///
/// ```swift
/// let pool = BlockingPool(threads: 4, name: "decode")
/// let size = try await pool.run { try Data(contentsOf: url).count }
/// ```
public final class BlockingPool: Sendable {
  /// A process-wide pool with one thread per active processor.
  public static let shared = BlockingPool(threads: ProcessInfo.processInfo.activeProcessorCount, name: "darkroom.blocking")

  /// The number of threads, the most work items that run at once.
  public let threadCount: Int

  private let state: Mutex<State>
  private let condition = NSCondition()

  private struct Job {
    let id: UInt64
    let work: @Sendable () -> Void
  }

  private struct State {
    var queue: [Job] = []
    var head = 0
    var nextID: UInt64 = 0
    var running = 0
    var peakRunning = 0
  }

  /// Creates a pool with `threads` threads (at least one), started now. The threads never exit
  /// and keep the pool alive: a pool lives as long as the process, so create few (one per kind of
  /// work), not one per request.
  public init(threads: Int, name: String = "darkroom.blocking") {
    threadCount = max(1, threads)
    state = Mutex(State())
    for index in 0..<threadCount {
      let thread = Thread { self.workerLoop() }
      thread.name = "\(name).\(index)"
      thread.stackSize = 8 << 20
      thread.start()
    }
  }

  /// The largest number of items that ran at once so far (for tests and diagnostics).
  public var peakConcurrency: Int { state.withLock { $0.peakRunning } }

  /// Runs `work` on a pool thread and returns its result.
  public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try Task.checkCancellation()
    let box = ContinuationBox<T>()
    let id = state.withLock { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        box.set(continuation)
        let job = Job(id: id) {
          guard box.claimStart() else { return }
          let result = Result { try work() }
          box.resume(with: result)
        }
        condition.lock()
        state.withLock { $0.queue.append(job) }
        condition.signal()
        condition.unlock()
      }
    } onCancel: {
      box.cancel()
    }
  }

  private func workerLoop() {
    while true {
      condition.lock()
      var job: Job?
      while job == nil {
        job = state.withLock { state -> Job? in
          guard state.head < state.queue.count else { return nil }
          let next = state.queue[state.head]
          state.head += 1
          if state.head > 64, state.head * 2 > state.queue.count {
            state.queue.removeFirst(state.head)
            state.head = 0
          }
          state.running += 1
          state.peakRunning = max(state.peakRunning, state.running)
          return next
        }
        if job == nil { condition.wait() }
      }
      condition.unlock()
      job?.work()
      state.withLock { $0.running -= 1 }
    }
  }
}

/// Holds a continuation so that exactly one of "finished" and "cancelled" resumes it.
private final class ContinuationBox<T: Sendable>: Sendable {
  private struct State {
    var continuation: CheckedContinuation<T, any Error>?
    var cancelled = false
    var started = false
    var done = false
  }
  private let state = Mutex(State())

  func set(_ continuation: CheckedContinuation<T, any Error>) {
    let cancelNow = state.withLock { state -> Bool in
      if state.cancelled {
        state.done = true
        return true
      }
      state.continuation = continuation
      return false
    }
    if cancelNow { continuation.resume(throwing: CancellationError()) }
  }

  /// Marks the work as started; false when it was cancelled first (the work must not run).
  func claimStart() -> Bool {
    state.withLock { state in
      guard !state.cancelled, !state.done else { return false }
      state.started = true
      return true
    }
  }

  func resume(with result: Result<T, any Error>) {
    let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
      guard !state.done else { return nil }
      state.done = true
      defer { state.continuation = nil }
      return state.continuation
    }
    continuation?.resume(with: result)
  }

  func cancel() {
    let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
      state.cancelled = true
      guard !state.done, let continuation = state.continuation else { return nil }
      state.done = true
      state.continuation = nil
      return continuation
    }
    continuation?.resume(throwing: CancellationError())
  }
}
