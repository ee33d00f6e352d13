import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

/// Counts how many runs of some stage work are inside it at once, and the most ever.
final class ConcurrencyMeter: Sendable {
  private let counts = Protected((current: 0, highest: 0, total: 0))
  func enter() {
    counts.withLock { counts in
      counts.current += 1
      counts.total += 1
      counts.highest = max(counts.highest, counts.current)
    }
  }
  func leave() { counts.withLock { $0.current -= 1 } }
  var peak: Int { counts.value.highest }
  var runs: Int { counts.value.total }
  var inside: Int { counts.value.current }
}

/// Records in order the sources that a stage processed.
final class StartLog: Sendable {
  private let entries = Protected<[String]>([])
  func append(_ entry: String) { entries.withLock { $0.append(entry) } }
  var order: [String] { entries.value }
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
final class EventLedger: OperationObserver, Sendable {
  private let recorded = Protected((events: [OperationID: [OperationEvent]](), terminalOrder: [String]()))
  func receive(_ event: OperationEvent, for operation: OperationInfo) {
    recorded.withLock { recorded in
      recorded.events[operation.id, default: []].append(event)
      if event.isTerminal { recorded.terminalOrder.append("\(operation.source ?? "?"):\(event.name)") }
    }
  }
  func events(of id: OperationID) -> [OperationEvent] { recorded.withLock { $0.events[id] ?? [] } }
  var terminals: [String] { recorded.value.terminalOrder }
  var all: [OperationID: [OperationEvent]] { recorded.value.events }
}

@Suite("Blocking pool shutdown", .timeLimit(.minutes(3)))
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
