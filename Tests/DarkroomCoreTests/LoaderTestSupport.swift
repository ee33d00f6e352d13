import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

/// Counts how many runs of some stage work are inside it at once, and the most ever.
final class ConcurrencyMeter: @unchecked Sendable {
  private let lock = NSLock()
  private var current = 0
  private var highest = 0
  private var total = 0
  func enter() {
    lock.withLock {
      current += 1
      total += 1
      highest = max(highest, current)
    }
  }
  func leave() { lock.withLock { current -= 1 } }
  var peak: Int { lock.withLock { highest } }
  var runs: Int { lock.withLock { total } }
  var inside: Int { lock.withLock { current } }
}

/// Records in order the sources that a stage processed.
final class StartLog: @unchecked Sendable {
  private let lock = NSLock()
  private var entries: [String] = []
  func append(_ entry: String) { lock.withLock { entries.append(entry) } }
  var order: [String] { lock.withLock { entries } }
}

/// A stage of a chosen resource that measures its own concurrency, logs what it processed, may
/// wait at a gate and may yield a number of times (work of some length, without sleeping).
struct ProbeStage: Stage {
  static let kind = "probe"
  var name: String
  var uses: StageResource = .cpu
  var meter = ConcurrencyMeter()
  var log: StartLog?
  var gate: Gate?
  var yields: @Sendable (ImageSource) -> Int = { _ in 0 }

  var identifier: String { "probe(\(name))" }

  func resource(for input: ImageSource) -> StageResource { uses }

  func process(_ input: ImageSource, context: StageContext) async throws -> ImageSource {
    meter.enter()
    defer { meter.leave() }
    log?.append(input.description)
    try await gate?.wait()
    for _ in 0..<yields(input) {
      try Task.checkCancellation()
      await Task.yield()
    }
    return input
  }
}

/// Records every operation's events, keyed by operation.
final class EventLedger: OperationObserver, @unchecked Sendable {
  private let lock = NSLock()
  private var events: [OperationID: [OperationEvent]] = [:]
  private var terminalOrder: [String] = []
  func receive(_ event: OperationEvent, for operation: OperationInfo) {
    lock.withLock {
      events[operation.id, default: []].append(event)
      if event.isTerminal { terminalOrder.append("\(operation.source ?? "?"):\(event.name)") }
    }
  }
  func events(of id: OperationID) -> [OperationEvent] { lock.withLock { events[id] ?? [] } }
  var terminals: [String] { lock.withLock { terminalOrder } }
  var all: [OperationID: [OperationEvent]] { lock.withLock { events } }
}

/// Waits, yielding, until `condition` holds (for work queued in another task to arrive).
func eventually(_ condition: () -> Bool) async {
  while !condition() { await Task.yield() }
}

@Suite("Blocking pool shutdown", .timeLimit(.minutes(1)))
struct BlockingPoolShutdownTests {
  @Test("after shutdown the threads finish the queue and exit, the pool is freed, and late work still runs")
  func shutdownReleasesThreads() async throws {
    weak var released: BlockingPool?
    do {
      let pool = BlockingPool(threads: 3, name: "shutdown-test")
      released = pool
      let values = try await withThrowingTaskGroup(of: Int.self) { group in
        for value in 0..<20 { group.addTask { try await pool.run { value * 2 } } }
        return try await group.reduce(0, +)
      }
      #expect(values == 380)
      pool.shutdown()
      #expect(try await pool.run { 7 } == 7)  // submitted after shutdown: still runs
    }
    // The threads held the pool; once they have exited it is freed.
    while released != nil { await Task.yield() }
  }

  @Test("a loader's pools are shut down when the loader goes away")
  func loaderReleasesPools() async throws {
    weak var pool: BlockingPool?
    weak var scheduler: StageScheduler?
    do {
      let loader = ImageLoader()
      pool = loader.scheduler.cpuPool
      scheduler = loader.scheduler
      let probe = ProbeStage(name: "work")
      _ = try await loader.load(ImageSource("x"), pipeline: Pipeline<ImageSource, ImageSource>(name: "p", probe)).value
    }
    while scheduler != nil || pool != nil { await Task.yield() }
  }
}
