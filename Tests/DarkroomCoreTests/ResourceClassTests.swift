import DarkroomCore
import Foundation
import Testing

@Suite("Resource classes")
struct ResourceClassTests {
  /// An order of events, recorded from many tasks.
  final class Log: Sendable {
    private let items = Protected<[String]>([])
    func append(_ item: String) { items.withLock { $0.append(item) } }
    var all: [String] { items.value }
  }

  /// Waits until `gate` opens or the task is cancelled.
  static func wait(for gate: Latch) async { try? await gate.waitUnlessCancelled() }

  /// Occupies the class's only slot until `open` is called.
  func hold(_ resource: ResourceClass) async throws -> (open: @Sendable () -> Void, task: Task<Void, any Error>) {
    let gate = Latch()
    let task = Task { try await resource.run(PriorityTicket()) { await Self.wait(for: gate) } }
    while resource.running == 0 { await Task.yield() }
    return ({ gate.open() }, task)
  }

  /// Starts work and returns once it waits in the queue.
  func enqueue(_ resource: ResourceClass, _ name: String, _ ticket: PriorityTicket, log: Log) async -> Task<Void, any Error> {
    let before = resource.waiting
    let task = Task { try await resource.run(ticket) { log.append(name) } }
    while resource.waiting == before { await Task.yield() }
    return task
  }

  @Test("the limit is never exceeded under 1,000 concurrent pieces of work, and is reached")
  func limit() async throws {
    let cpu = ResourceClass(name: "cpu", limit: 3)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<1000 {
        group.addTask {
          try await cpu.run(PriorityTicket(LoadPriority.allCases[index % 3])) {
            #expect(cpu.running <= 3)
            await Task.yield()
          }
        }
      }
      try await group.waitForAll()
    }
    #expect(cpu.peak == 3 && cpu.running == 0 && cpu.waiting == 0)
  }

  @Test("higher priorities go first; within a priority, first come first served")
  func order() async throws {
    let resource = ResourceClass(name: "cpu", limit: 1)
    let log = Log()
    let (open, holder) = try await hold(resource)
    var tasks: [Task<Void, any Error>] = []
    for (name, priority) in [
      ("low1", LoadPriority.low), ("normal1", .normal), ("high1", .high), ("low2", .low), ("normal2", .normal),
    ] {
      tasks.append(await enqueue(resource, name, PriorityTicket(priority), log: log))
    }
    open()
    try await holder.value
    for task in tasks { try await task.value }
    #expect(log.all == ["high1", "normal1", "normal2", "low1", "low2"])
  }

  @Test("raising a ticket while its work waits moves it ahead")
  func reprioritise() async throws {
    let resource = ResourceClass(name: "network", limit: 1)
    let log = Log()
    let (open, holder) = try await hold(resource)
    let late = PriorityTicket(.low)
    let tasks = [
      await enqueue(resource, "a", PriorityTicket(.normal), log: log),
      await enqueue(resource, "b", PriorityTicket(.low), log: log),
      await enqueue(resource, "late", late, log: log),
    ]
    late.priority = .high
    open()
    try await holder.value
    for task in tasks { try await task.value }
    #expect(log.all == ["late", "a", "b"])
  }

  @Test("a cancelled waiter leaves the queue at once; the others still run")
  func cancellation() async throws {
    let resource = ResourceClass(name: "disk", limit: 1)
    let log = Log()
    let (open, holder) = try await hold(resource)
    let doomed = await enqueue(resource, "doomed", PriorityTicket(.high), log: log)
    let kept = await enqueue(resource, "kept", PriorityTicket(.low), log: log)
    doomed.cancel()
    await #expect(throws: CancellationError.self) { try await doomed.value }
    #expect(resource.waiting == 1)
    open()
    try await holder.value
    try await kept.value
    #expect(log.all == ["kept"])
    #expect(resource.running == 0)
  }

  @Test("raising the limit starts waiting work at once")
  func raiseLimit() async throws {
    let resource = ResourceClass(name: "cpu", limit: 1)
    let log = Log()
    let (open, holder) = try await hold(resource)
    let waiting = await enqueue(resource, "next", PriorityTicket(), log: log)
    resource.limit = 2
    try await waiting.value
    #expect(log.all == ["next"] && resource.peak == 2)
    open()
    try await holder.value
  }

  @Test("with a bounded queue, a caller beyond the slots and the queue is refused at once, and the queue still serves")
  func boundedQueue() async throws {
    let resource = ResourceClass(name: "renders", limit: 1)
    let (open, holder) = try await hold(resource)
    let log = Log()
    let first = Task { try await resource.run(PriorityTicket()) { log.append("queued") } }
    while resource.waiting == 0 { await Task.yield() }
    await #expect(throws: ResourceClass.QueueFull.self) { try await resource.acquire(PriorityTicket(), maxWaiting: 1) }
    #expect(resource.waiting == 1 && resource.running == 1)
    open()
    try await holder.value
    try await first.value
    // A free slot admits even when no one may wait.
    try await resource.acquire(PriorityTicket(), maxWaiting: 0)
    resource.release()
    #expect(log.all == ["queued"] && resource.running == 0 && resource.waiting == 0)
  }
}
