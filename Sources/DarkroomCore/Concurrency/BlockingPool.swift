import CFileShim
import Foundation

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
package final class BlockingPool: @unchecked Sendable {
  /// A process-wide pool with one thread per active processor.
  public static let shared = BlockingPool(threads: ProcessInfo.processInfo.activeProcessorCount, name: "darkroom.blocking")

  /// The number of threads, the most work items that run at once.
  public let threadCount: Int

  // Every mutable field below is guarded by `condition`'s lock (a pthread mutex, which thread
  // sanitizers understand); that is what makes the class safe to share (@unchecked Sendable).
  // Not a `Protected`: the pool's threads sleep on the condition until work arrives.
  private let condition = NSCondition()
  private var queue: [@Sendable () -> Void] = []
  private var head = 0
  private var running = 0
  private var peakRunning = 0
  private var busy = Duration.zero
  private var stopping = false

  /// Creates a pool with `threads` threads (at least one), started now. The threads keep the pool
  /// alive until ``shutdown()``: create few pools (one per kind of work), not one per request.
  public init(threads: Int, name: String = "darkroom.blocking") {
    threadCount = max(1, threads)
    for index in 0..<threadCount {
      let threadName = "\(name).\(index)"
      let thread = Thread {
        // Named from inside, for the kernel (`ps`, `perf`, /proc): Foundation keeps the name
        // to itself on Linux, where the thread shows its creator's name instead. The kernel
        // keeps 15 bytes.
        _ = dr_name_this_thread(threadName)
        self.workerLoop()
      }
      thread.name = threadName
      thread.stackSize = 8 << 20
      thread.start()
    }
  }

  /// The largest number of items that ran at once so far (for tests and diagnostics).
  public var peakConcurrency: Int { condition.withLock { peakRunning } }

  /// The items running now (for tests and diagnostics: a stopped computation has left).
  public var runningCount: Int { condition.withLock { running } }

  /// How long the pool's finished items ran in all (for tests and diagnostics: a libvips
  /// computation holds its pool thread until its workers stop, so this shows how long a cancelled
  /// one went on).
  public var busyTime: Duration { condition.withLock { busy } }

  /// Runs `work` on a pool thread and returns its result.
  public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try Task.checkCancellation()
    let box = ContinuationBox<T>()
    let holder = WorkHolder(work)
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        box.set(continuation)
        let job: @Sendable () -> Void = {
          // The work (and what it captured) is released before the caller resumes, so nothing it
          // held — an image, an open table — outlives the call.
          guard box.claimStart() else {
            _ = holder.take()
            return
          }
          guard let result = holder.run() else { return }
          box.resume(with: result)
        }
        let orphaned = condition.withLock { () -> Bool in
          queue.append(job)
          condition.signal()
          return stopping
        }
        if orphaned {  // after shutdown: a thread of its own, which exits when the queue is empty
          let thread = Thread { self.workerLoop() }
          thread.stackSize = 8 << 20
          thread.start()
        }
      }
    } onCancel: {
      box.cancel()
    }
  }

  /// Lets the threads exit once the work already queued has run. Work submitted afterwards still
  /// runs, on a thread started for it. (An `ImageLoader`'s pools are shut down when it goes away.)
  public func shutdown() {
    condition.withLock {
      stopping = true
      condition.broadcast()
    }
  }

  private static let done: @Sendable () -> Void = {}

  private func workerLoop() {
    while true {
      condition.lock()
      while head >= queue.count && !stopping { condition.wait() }
      if head >= queue.count {
        condition.unlock()
        return
      }
      let job = queue[head]
      queue[head] = Self.done  // the queue must not keep finished jobs (and their captures) alive
      head += 1
      if head > 64, head * 2 > queue.count {
        queue.removeFirst(head)
        head = 0
      }
      running += 1
      peakRunning = max(peakRunning, running)
      condition.unlock()
      let started = ContinuousClock.now
      job()
      let took = ContinuousClock.now - started
      condition.withLock {
        running -= 1
        busy += took
      }
    }
  }
}

/// Hands a job's work to the one thread that runs it, once, and forgets it.
private final class WorkHolder<T: Sendable>: Sendable {
  private let work: Protected<(@Sendable () throws -> T)?>

  init(_ work: @escaping @Sendable () throws -> T) { self.work = Protected(work) }

  /// Runs the work and releases it before returning its result.
  func run() -> Result<T, any Error>? {
    guard let work = take() else { return nil }
    return Result { try work() }
  }

  func take() -> (@Sendable () throws -> T)? {
    work.withLock { work in
      defer { work = nil }
      return work
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
  private let state = Protected(State())

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
