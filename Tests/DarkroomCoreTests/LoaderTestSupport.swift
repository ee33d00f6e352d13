import DarkroomCore
import DarkroomTesting
import Foundation

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
