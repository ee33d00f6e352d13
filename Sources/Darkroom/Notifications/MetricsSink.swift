import DarkroomCore
import Foundation
import Metrics

/// Reports to swift-metrics (Prometheus, StatsD, OpenTelemetry… through the backend bootstrapped
/// in `MetricsSystem`): counters and timers per stage, cache hits and misses per store, and
/// operations and failures by code.
///
/// As a sink it counts notifications by name; as an `OperationObserver` (directly, or through a
/// `Notifier` holding it) it measures every stage and operation:
///
/// | metric | kind | dimensions |
/// |---|---|---|
/// | `darkroom_stage_duration` | timer | `stage` |
/// | `darkroom_stages_total` | counter | `stage`, `shared` (`true` when joined) |
/// | `darkroom_cache_total` | counter | `store`, `outcome` (hit, miss, revalidated, stored, storeFailed) |
/// | `darkroom_operations_total` | counter | `pipeline`, `outcome` (finished, failed, cancelled) |
/// | `darkroom_operation_duration` | timer | `pipeline` |
/// | `darkroom_failures_total` | counter | `code`, `stage` |
/// | `darkroom_notifications_total` | counter | `name` |
///
/// ```swift
/// MetricsSystem.bootstrap(PrometheusMetricsFactory())
/// let notifier = Notifier(sinks: [MetricsSink()])
/// ```
public final class MetricsSink: NotificationSink, OperationObserver, Sendable {
  public let name = "metrics"
  /// Prepended to every metric name (`darkroom_`).
  public let prefix: String
  private struct State {
    var counters: [String: Counter] = [:]
    var timers: [String: Timer] = [:]
    var starts: [OperationID: ContinuousClock.Instant] = [:]
  }
  private let state = Protected(State())

  private let factory: (any MetricsFactory)?

  /// Reports through `factory`, or the factory bootstrapped in `MetricsSystem` when `nil`.
  public init(prefix: String = "darkroom_", factory: (any MetricsFactory)? = nil) {
    self.prefix = prefix
    self.factory = factory
  }

  public func deliver(_ notification: LoadNotification) async throws {
    counter("notifications_total", ["name": notification.name]).increment()
  }

  public func receive(_ event: OperationEvent, for operation: OperationInfo) {
    switch event {
    case .started:
      state.withLock { $0.starts[operation.id] = .now }
    case .stageFinished(let stage, let duration):
      counter("stages_total", ["stage": stage.kind, "shared": String(stage.joined)]).increment()
      timer("stage_duration", ["stage": stage.kind]).recordNanoseconds(Self.nanoseconds(duration))
    case .cache(let cache):
      counter("cache_total", ["store": cache.store, "outcome": cache.outcome.rawValue]).increment()
    case .finished, .failed, .cancelled:
      counter("operations_total", ["pipeline": operation.pipelineName, "outcome": event.name]).increment()
      if let started = state.withLock({ $0.starts.removeValue(forKey: operation.id) }) {
        timer("operation_duration", ["pipeline": operation.pipelineName]).recordNanoseconds(
          Self.nanoseconds(ContinuousClock.now - started))
      }
      if case .failed(let error) = event {
        counter("failures_total", ["code": error.code.rawValue, "stage": error.stageKind ?? "none"]).increment()
      }
    default:
      break
    }
  }

  private func counter(_ name: String, _ dimensions: [String: String]) -> Counter {
    let sorted = dimensions.sorted { $0.key < $1.key }
    let key = name + sorted.map { "|\($0.key)=\($0.value)" }.joined()
    return state.withLock { state in
      if let counter = state.counters[key] { return counter }
      let dimensions = sorted.map { ($0.key, $0.value) }
      let counter =
        factory.map { Counter(label: prefix + name, dimensions: dimensions, factory: $0) }
        ?? Counter(label: prefix + name, dimensions: dimensions)
      state.counters[key] = counter
      return counter
    }
  }

  private func timer(_ name: String, _ dimensions: [String: String]) -> Timer {
    let sorted = dimensions.sorted { $0.key < $1.key }
    let key = name + sorted.map { "|\($0.key)=\($0.value)" }.joined()
    return state.withLock { state in
      if let timer = state.timers[key] { return timer }
      let dimensions = sorted.map { ($0.key, $0.value) }
      let timer =
        factory.map { Timer(label: prefix + name, dimensions: dimensions, factory: $0) }
        ?? Timer(label: prefix + name, dimensions: dimensions)
      state.timers[key] = timer
      return timer
    }
  }

  private static func nanoseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
  }
}
