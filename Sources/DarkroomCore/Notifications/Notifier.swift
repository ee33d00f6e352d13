import Foundation

/// Fans notifications out to sinks: each sink receives them one at a time, in the order posted,
/// on its own task, so a slow or failing sink never holds up a load or another sink.
///
/// Use it as an ``OperationObserver`` (for example in ``ImageLoader/Configuration/observers``)
/// to announce every operation's end as ``LoadNotification/Name/didFinish``, `didFail` or
/// `didCancel`, with the output's dimensions, format and size, the cache outcomes and the error.
/// A `notify` stage posts its own named notification through one. ``flush()`` waits until all
/// posted notifications are delivered; ``close()`` also closes the sinks. A notifier let go
/// without `close()` delivers what it still holds and closes its sinks on its own tasks, but
/// nobody waits for that: close it before the program exits. The notifiers of `notify` stages
/// loaded from JSON are kept in the ``PipelineResources`` of the ``StageBuildContext`` they were
/// loaded with.
///
/// ```swift
/// let notifier = Notifier(sinks: [JSONLinesSink.standardOutput, webhook])
/// var configuration = ImageLoader.Configuration()
/// configuration.observers.append(notifier)
/// …
/// await notifier.close()
/// ```
public final class Notifier: OperationObserver, Sendable {
  /// Deliveries and failures per sink.
  public struct Statistics: Sendable, Hashable {
    public var posted = 0
    public var delivered = 0
    public var failed = 0
    /// The last delivery error.
    public var lastError: String?
  }

  /// One sink's queue: counts what is posted and not yet handled, and wakes the tasks waiting for
  /// it to shrink (``flush()``, ``waitUntilPending(below:)``).
  private final class Counters: Sendable {
    private let state = Waitable((statistics: Statistics(), pending: 0))

    var snapshot: Statistics { state.value.statistics }

    func posted() {
      state.withLock { state in
        state.statistics.posted += 1
        state.pending += 1
      }
    }

    func handled(_ error: (any Error)?) {
      state.withLock { state in
        if let error {
          state.statistics.failed += 1
          state.statistics.lastError = (error as? PipelineError)?.message ?? "\(error)"
        } else {
          state.statistics.delivered += 1
        }
        state.pending -= 1
      }
    }

    func dropped() {
      state.withLock { state in
        state.statistics.posted -= 1
        state.pending -= 1
      }
    }

    /// Returns once fewer than `limit` notifications are pending, or the task is cancelled.
    func waitUntilPending(below limit: Int) async {
      try? await state.waitUnlessCancelled { $0.pending < limit }
    }

    func drained() async { await waitUntilPending(below: 1) }
  }

  private final class Lane: Sendable {
    let sink: any NotificationSink
    let continuation: AsyncStream<LoadNotification>.Continuation
    let task: Task<Void, Never>
    let counters: Counters

    init(_ sink: any NotificationSink) {
      self.sink = sink
      let (stream, continuation) = AsyncStream<LoadNotification>.makeStream()
      self.continuation = continuation
      let counters = Counters()
      self.counters = counters
      // Ends when the stream is finished (``close()``, or the notifier let go), after delivering
      // what the stream still holds; then closes the sink.
      task = Task {
        for await notification in stream {
          do {
            try await sink.deliver(notification)
            counters.handled(nil)
          } catch {
            counters.handled(error)
          }
        }
        await sink.close()
      }
    }

    func post(_ notification: LoadNotification) {
      counters.posted()
      if case .terminated = continuation.yield(notification) { counters.dropped() }
    }
  }

  private let lanes: [Lane]
  /// Post every operation event (named after it) instead of only the ends.
  public let postsEvents: Bool
  /// What each running operation's cache checkpoints did, until it ends.
  private let cacheEvents = Protected<[OperationID: [CacheEvent]]>([:])
  private let startTimes = Protected<[OperationID: ContinuousClock.Instant]>([:])

  /// A notifier delivering to `sinks`. With `events`, as an observer it posts every operation
  /// event under the event's name (`started`, `stageStarted`, …, `finished`, `failed`,
  /// `cancelled`) rather than only `didFinish` / `didFail` / `didCancel`: the runner's
  /// `--events jsonl` is such a notifier with a ``JSONLinesSink``.
  public init(sinks: [any NotificationSink], events: Bool = false) {
    lanes = sinks.map(Lane.init)
    postsEvents = events
  }

  /// The sinks' names and statistics, in the order given.
  public var statistics: [(sink: String, statistics: Statistics)] {
    lanes.map { ($0.sink.name, $0.counters.snapshot) }
  }

  /// Queues `notification` for every sink and returns at once.
  public func post(_ notification: LoadNotification) {
    for lane in lanes { lane.post(notification) }
  }

  /// Returns once every sink has fewer than `limit` notifications waiting to be delivered: a
  /// producer that awaits this before posting more keeps the queue bounded when a sink stalls
  /// (a reader of `--events jsonl` that stopped reading). Cancelling the task returns at once.
  ///
  /// ```swift
  /// await notifier.waitUntilPending(below: 1_000)
  /// startNextImage()
  /// ```
  public func waitUntilPending(below limit: Int) async {
    for lane in lanes { await lane.counters.waitUntilPending(below: max(1, limit)) }
  }

  /// Waits until every notification posted so far has been delivered (or has failed).
  public func flush() async {
    for lane in lanes { await lane.counters.drained() }
  }

  /// Delivers what is queued, then closes the sinks; later posts are dropped.
  public func close() async {
    await flush()
    for lane in lanes {
      lane.continuation.finish()
      await lane.task.value
    }
  }

  /// A notifier let go without ``close()`` still delivers what it holds and then closes its
  /// sinks, on its own tasks (nobody waits for them).
  deinit {
    for lane in lanes { lane.continuation.finish() }
  }

  // MARK: OperationObserver

  /// Sinks that observe operations too (`MetricsSink`) see every event first.
  public func receive(_ event: OperationEvent, for operation: OperationInfo) {
    for lane in lanes { (lane.sink as? any OperationObserver)?.receive(event, for: operation) }
    if postsEvents {
      postEvent(event, operation)
      return
    }
    switch event {
    case .started:
      startTimes.withLock { $0[operation.id] = .now }
    case .cache(let cache):
      cacheEvents.withLock { $0[operation.id, default: []].append(cache) }
    case .finished(let summary):
      post(notification(LoadNotification.Name.didFinish, operation, image: LoadNotification.Image(summary)))
    case .failed(let error):
      post(notification(LoadNotification.Name.didFail, operation, error: LoadNotification.Failure(error)))
    case .cancelled:
      post(notification(LoadNotification.Name.didCancel, operation))
    default:
      break
    }
  }

  private func postEvent(_ event: OperationEvent, _ operation: OperationInfo) {
    var elapsed: Double?
    if case .started = event {
      startTimes.withLock { $0[operation.id] = .now }
    } else if event.isTerminal, let started = startTimes.withLock({ $0.removeValue(forKey: operation.id) }) {
      elapsed = Self.milliseconds(ContinuousClock.now - started)
    }
    post(LoadNotification(event: event, operation: operation, milliseconds: elapsed))
  }

  private func notification(
    _ name: String, _ operation: OperationInfo, image: LoadNotification.Image? = nil, error: LoadNotification.Failure? = nil
  ) -> LoadNotification {
    let cache = cacheEvents.withLock { $0.removeValue(forKey: operation.id) } ?? []
    let started = startTimes.withLock { $0.removeValue(forKey: operation.id) }
    return LoadNotification(
      name: name, operationID: operation.id.description, pipeline: operation.pipelineName, source: operation.source, image: image,
      cache: cache, error: error, milliseconds: started.map { Self.milliseconds(ContinuousClock.now - $0) })
  }

  private static func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
  }
}
