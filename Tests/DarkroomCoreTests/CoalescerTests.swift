import DarkroomCore
import Foundation
import Testing

@Suite("Coalescing")
struct CoalescerTests {
  /// A gate the shared work waits at, and what it saw.
  final class Probe: Sendable {
    let gate = Latch()
    private let seen = Protected((cancelled: false, tickets: [PriorityTicket]()))
    func open() { gate.open() }
    /// Waits until ``open()`` or until the task is cancelled.
    func wait() async { try? await gate.waitUnlessCancelled() }
    func sawCancellation() { seen.withLock { $0.cancelled = true } }
    var wasCancelled: Bool { seen.value.cancelled }
    func record(_ ticket: PriorityTicket) { seen.withLock { $0.tickets.append(ticket) } }
    var ticket: PriorityTicket? { seen.value.tickets.first }
  }

  func work(_ probe: Probe, value: Int = 42) -> @Sendable (PriorityTicket) async throws -> Int {
    { ticket in
      probe.record(ticket)
      await probe.wait()
      if Task.isCancelled {
        probe.sawCancellation()
        throw CancellationError()
      }
      return value
    }
  }

  func waitUntil(_ coalescer: Coalescer<String, Int>, key: String, waiters: Int) async {
    while coalescer.waiters(for: key) < waiters { await Task.yield() }
  }

  @Test("100 concurrent callers share one run")
  func shareOneRun() async throws {
    let coalescer = Coalescer<String, Int>()
    let probe = Probe()
    let values = try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<100 { group.addTask { try await coalescer.value(for: "a", work: self.work(probe)) } }
      await waitUntil(coalescer, key: "a", waiters: 100)
      probe.open()
      return try await group.reduce(into: [Int]()) { $0.append($1) }
    }
    #expect(values == Array(repeating: 42, count: 100))
    #expect(coalescer.started == 1 && coalescer.inFlight == 0)
    _ = try await coalescer.value(for: "a") { _ in 7 }
    #expect(coalescer.started == 2)  // finished work is not kept
  }

  @Test("a cancelled waiter leaves alone; the work goes on for the others and takes their priority")
  func waiterLeaves() async throws {
    let coalescer = Coalescer<String, Int>()
    let probe = Probe()
    let low = Task { try await coalescer.value(for: "k", priority: .low, work: work(probe)) }
    await waitUntil(coalescer, key: "k", waiters: 1)
    let high = Task { try await coalescer.value(for: "k", priority: .high, work: work(probe)) }
    await waitUntil(coalescer, key: "k", waiters: 2)
    #expect(probe.ticket?.priority == .high)
    high.cancel()
    await #expect(throws: CancellationError.self) { try await high.value }
    #expect(probe.ticket?.priority == .low)
    probe.open()
    #expect(try await low.value == 42)
    #expect(!probe.wasCancelled && coalescer.started == 1)
  }

  @Test("the work is cancelled when its last waiter goes")
  func lastWaiterCancels() async throws {
    let coalescer = Coalescer<String, Int>()
    let probe = Probe()
    let waiters = (0..<3).map { _ in Task { try await coalescer.value(for: "k", work: work(probe)) } }
    await waitUntil(coalescer, key: "k", waiters: 3)
    for waiter in waiters { waiter.cancel() }
    for waiter in waiters { await #expect(throws: CancellationError.self) { try await waiter.value } }
    #expect(coalescer.inFlight == 0)
    probe.open()
    while !probe.wasCancelled { await Task.yield() }
  }

  @Test("a failure reaches every waiter")
  func failure() async throws {
    struct Boom: Error {}
    let coalescer = Coalescer<String, Int>()
    let probe = Probe()
    let waiters = (0..<5).map { _ in
      Task {
        try await coalescer.value(for: "k") { _ in
          await probe.wait()
          throw Boom()
        }
      }
    }
    await waitUntil(coalescer, key: "k", waiters: 5)
    probe.open()
    for waiter in waiters { await #expect(throws: Boom.self) { try await waiter.value } }
  }

  @Test("a quick next step stays open to every caller resumed with the same result (cohort)")
  func cohortKeepsNextStepOpen() async throws {
    let coalescer = Coalescer<String, Int>()
    let probe = Probe()
    let nextRuns = Counter()
    let first = PriorityTicket()
    let second = PriorityTicket()
    async let early = chained(coalescer, probe, ticket: first, yieldsBeforeNext: 0, runs: nextRuns)
    async let late = chained(coalescer, probe, ticket: second, yieldsBeforeNext: 200, runs: nextRuns)
    await waitUntil(coalescer, key: "a", waiters: 2)
    probe.open()
    let values = try await [early, late]
    #expect(values == [7, 7])
    #expect(nextRuns.value == 1)
  }

  final class Counter: Sendable {
    private let count = Protected(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.value }
  }

  func chained(
    _ coalescer: Coalescer<String, Int>, _ probe: Probe, ticket: PriorityTicket, yieldsBeforeNext: Int, runs: Counter
  ) async throws -> Int {
    let step = try await coalescer.value(for: "a", ticket: ticket, after: nil, work: work(probe))
    for _ in 0..<yieldsBeforeNext { await Task.yield() }
    return try await coalescer.value(for: "b", ticket: ticket, after: step.cohort) { _ in
      runs.increment()
      return 7
    }.value
  }
}
