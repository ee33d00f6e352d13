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
  private let recorded = Protected<[String]>([])
  package let pool: BlockingPool

  /// A harness whose stages' blocking work runs on the process's shared pool.
  public init() { pool = .shared }
  package init(pool: BlockingPool) { self.pool = pool }

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
///
/// ```swift
/// let observer = RecordingObserver()
/// let operation = pipeline.run(5, options: RunOptions(observers: [observer]))
/// _ = await operation.result
/// #expect(observer.names.first == "started")
/// ```
public final class RecordingObserver: OperationObserver {
  private let recorded = Protected<[(OperationInfo, OperationEvent)]>([])

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
