import DarkroomCore
import Prometheus

/// What an ``ImageServer`` counts, in Prometheus' text format at `/metrics` (swift-prometheus).
///
/// Requests by status, a latency histogram, requests in flight, renders waiting for a slot,
/// result-cache hits and misses, renders, origin fetches, bytes out, and failures by error code.
/// Every name starts with `darkroom_`.
///
/// ```swift
/// let server = try ImageServer(configuration: configuration)
/// // … after some requests:
/// print(server.metrics.text())   // darkroom_http_requests_total{status="200"} 12 …
/// ```
public final class ServerMetrics: Sendable {
  /// The registry behind ``text()``; a host app may add its own metrics to it.
  public let registry: PrometheusCollectorRegistry
  private let latency: DurationHistogram
  private let inFlight: Gauge
  private let waiting: Gauge
  private let hits: Counter
  private let misses: Counter
  private let rendersCounter: Counter
  private let bytesOut: Counter
  private let sharedCounters: [String: Counter]
  /// The counters of the statuses seen so far (one registry lookup per status, not per request).
  private let statusCounters = Protected<[Int: Counter]>([:])

  /// Read when the metrics are written: how many renders wait for a slot.
  private let queueDepth: @Sendable () -> Int
  /// Read when the metrics are written: whether the shared cache listens, with its gauge.
  private let sharedListening: (read: @Sendable () -> Bool, gauge: Gauge)?

  /// Metrics in `registry`; `queueDepth` says how many renders wait, and
  /// `sharedCacheListening`, given when there is a shared cache, whether it listens (both read
  /// at each ``text()``).
  public init(
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), queueDepth: @escaping @Sendable () -> Int = { 0 },
    sharedCacheListening: (@Sendable () -> Bool)? = nil
  ) {
    self.registry = registry
    self.queueDepth = queueDepth
    sharedListening = sharedCacheListening.map { read in
      let help = "1 while the shared cache hears when claims end in the cluster."
      return (read, registry.makeGauge(descriptor: Self.name("shared_cache_listening", unit: "", help)))
    }
    latency = registry.makeDurationHistogram(
      descriptor: Self.name("http_request_duration", unit: "seconds", "Time from request to response."),
      buckets: [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
      ])
    inFlight = registry.makeGauge(descriptor: Self.name("http_requests_in_flight", unit: "", "Requests being answered."))
    waiting = registry.makeGauge(descriptor: Self.name("render_queue_depth", unit: "", "Renders waiting for a slot."))
    hits = registry.makeCounter(descriptor: Self.name("result_cache_hits", unit: "total", "Answers from the result cache."))
    misses = registry.makeCounter(descriptor: Self.name("result_cache_misses", unit: "total", "Lookups the result cache missed."))
    rendersCounter = registry.makeCounter(descriptor: Self.name("renders", unit: "total", "Renders started (fetch and process)."))
    bytesOut = registry.makeCounter(descriptor: Self.name("http_bytes_out", unit: "total", "Response body bytes sent."))
    var shared: [String: Counter] = [:]
    for outcome in SharedOutcome.allCases {
      shared[outcome.rawValue] = registry.makeCounter(
        name: "darkroom_shared_cache_total", labels: [("outcome", outcome.rawValue)])
    }
    sharedCounters = shared
  }

  /// What the shared result cache (`--shared-cache`) did for one render.
  enum SharedOutcome: String, CaseIterable {
    /// Answered from the shared cache.
    case hit
    /// Rendered here, holding the cluster's claim, and shared.
    case rendered
    /// Waited for another instance's render, then answered from the shared cache.
    case waited
    /// The shared cache could not be reached: rendered here alone.
    case unavailable
  }

  func shared(_ outcome: SharedOutcome) { sharedCounters[outcome.rawValue]?.increment() }

  private static func name(_ metric: String, unit: String, _ help: String) -> MetricNameDescriptor {
    MetricNameDescriptor(namespace: "darkroom", metricName: metric, unitName: unit, helpText: help)
  }

  /// The metrics, in Prometheus' text exposition format.
  public func text() -> String {
    waiting.set(Double(queueDepth()))
    if let (read, gauge) = sharedListening { gauge.set(read() ? 1.0 : 0.0) }
    return registry.emitToString()
  }

  func requestStarted() { inFlight.increment() }

  /// One request answered with `status` and a body of `bytes`.
  func requestEnded(status: Int, bytes: Int, duration: Duration) {
    inFlight.decrement()
    requestCounter(status).increment()
    latency.record(duration)
    if bytes > 0 { bytesOut.increment(by: Int64(bytes)) }
  }

  private func requestCounter(_ status: Int) -> Counter {
    if let counter = statusCounters.withLock({ $0[status] }) { return counter }
    let counter = registry.makeCounter(
      descriptor: Self.name("http_requests", unit: "total", "Requests answered, by status."), labels: [("status", String(status))]
    )
    statusCounters.withLock { $0[status] = counter }
    return counter
  }

  func failed(_ code: PipelineError.Code) {
    registry.makeCounter(
      descriptor: Self.name("failures", unit: "total", "Failed requests, by error code."), labels: [("code", code.rawValue)]
    ).increment()
  }

  func cacheHit() { hits.increment() }
  func cacheMiss() { misses.increment() }
  func renderStarted() { rendersCounter.increment() }
}
