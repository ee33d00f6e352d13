import DarkroomCore
import Foundation

/// Runs single stages and whole pipelines in tests, collecting events.
///
/// ```swift
/// let harness = StageHarness()
/// let output = try await harness.run(MyStage(), on: input)
/// #expect(harness.notes.isEmpty)
/// ```
public final class StageHarness: Sendable {
  private let recorded = Locked<[String]>([])
  public let pool: BlockingPool

  public init(pool: BlockingPool = .shared) { self.pool = pool }

  /// The notes stages logged through their context.
  public var notes: [String] { recorded.withLock { $0 } }

  /// A context for calling `process` directly.
  public func context(source: ImageSource? = nil, pipelineName: String = "test") -> StageContext {
    StageContext(
      pipelineName: pipelineName, source: source, pool: pool,
      emitNote: { [weak self] note in self?.recorded.withLock { $0.append(note) } })
  }

  /// Runs one stage on an input.
  public func run<S: Stage>(_ stage: S, on input: S.Input, source: ImageSource? = nil) async throws -> S.Output {
    try await stage.process(input, context: context(source: source))
  }
}

/// Records every event of the operations it observes, for assertions.
public final class RecordingObserver: OperationObserver {
  private let recorded = Locked<[(OperationInfo, OperationEvent)]>([])

  public init() {}

  public func receive(_ event: OperationEvent, for operation: OperationInfo) {
    recorded.withLock { $0.append((operation, event)) }
  }

  /// All events, in order.
  public var events: [OperationEvent] { recorded.withLock { $0.map(\.1) } }
  /// Event names, in order.
  public var names: [String] { events.map(\.name) }
  /// Events of one operation.
  public func events(of id: OperationID) -> [OperationEvent] { recorded.withLock { $0.filter { $0.0.id == id }.map(\.1) } }
}

/// A value shared between tasks in tests, behind a lock.
///
/// ```swift
/// let count = Locked(0)
/// await withTaskGroup(of: Void.self) { group in group.addTask { count.withLock { $0 += 1 } } }
/// ```
///
/// The lock is an `NSLock` (a pthread mutex), which ThreadSanitizer understands; it does not see
/// through `Synchronization.Mutex` and reports races on values guarded by one.
public final class Locked<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var storage: Value  // guarded by `lock`
  public init(_ value: Value) { storage = value }
  /// Runs `body` with exclusive access.
  public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&storage)
  }
  /// The current value.
  public var value: Value { withLock { $0 } }
}
