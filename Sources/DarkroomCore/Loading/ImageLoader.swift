import Foundation

/// Runs pipelines for many callers at once, with none of the work done twice and cheap work never
/// stuck behind expensive work — Nuke's pipeline and AsyncImageLoader, for servers.
///
/// - Each ``load(_:pipeline:priority:target:tag:options:)`` starts an operation with the usual
///   lifecycle (started, stages, willFinish, then finished / failed / cancelled).
/// - Stage work is bounded per resource: network transfers (default 8), CPU work (default: one per
///   core), disk I/O (default 4). Waiting work goes by priority, then first come first served;
///   ``setPriority(_:for:)`` changes it while it waits.
/// - Identical in-flight work is shared at every stage boundary: one transfer per URL, one decode
///   per source, one run per identical stage chain. A waiter that is cancelled leaves the shared
///   work to the others; the work is cancelled when its last waiter goes, and runs at the highest
///   priority of its waiters.
/// - Loads for one ``LoadTarget`` start and are delivered in the order asked: when a later load
///   for the target finishes first (the full image was cached, say, while its thumbnail was still
///   loading), the earlier loads are cancelled rather than delivered after it.
/// - Cancel by source, by target, by target and tag, or everything.
///
/// ```swift
/// let loader = ImageLoader()
/// let avatar = LoadTarget("avatar-42")
/// let thumb = loader.load(ImageSource(url), pipeline: thumbnail, target: avatar, tag: "thumbnail")
/// let full = loader.load(ImageSource(url), pipeline: fullSize, priority: .low, target: avatar, tag: "full")
/// loader.setPriority(.high, for: full.id)
/// let image = try await thumb.value
/// ```
public final class ImageLoader: @unchecked Sendable {
  /// The loader's limits and defaults.
  public struct Configuration: Sendable {
    /// Network transfers at once.
    public var networkLimit = 8
    /// CPU-bound stage work at once.
    public var cpuLimit = ProcessInfo.processInfo.activeProcessorCount
    /// CPU stage calls admitted beyond ``cpuLimit`` to wait in the CPU pool's own queue (default
    /// 0). With one waiting there, a pool thread that finishes a call starts the next at once,
    /// instead of idling while the finished run hops through the cooperative threads to let the
    /// next one in: `darkroom run` sets 1 (case A 2 % faster; Docs/Performance.md, "Issue 18").
    /// The pool still runs ``cpuLimit`` calls at a time.
    public var cpuQueued = 0
    /// Disk reads and writes at once.
    public var diskLimit = 4
    /// Share identical in-flight work (on by default; off only to compare).
    public var coalescing = true
    /// The longest one operation may take (default 60 s, as AsyncImageView); `nil` for no limit.
    public var timeout: Duration? = .seconds(60)
    /// The longest one stage may take, unless ``stageTimeouts`` names its kind.
    public var stageTimeout: Duration?
    /// Time limits per stage kind (`["fetch": .seconds(10)]`).
    public var stageTimeouts: [String: Duration] = [:]
    /// Observers of every operation the loader starts.
    public var observers: [any OperationObserver] = []

    public init() {}
  }

  /// The scheduler bounding and sharing the loader's stage work (its resource classes show what
  /// runs and waits).
  package let scheduler: StageScheduler
  /// The limits and defaults the loader was made with.
  public let configuration: Configuration

  private struct Load {
    let sequence: UInt64
    let source: ImageSource
    let target: LoadTarget?
    let tag: String?
    let ticket: PriorityTicket
    let cancel: @Sendable () -> Void
  }

  private struct TargetState {
    var lastSource: ImageSource
    var active: Set<OperationID> = []
    /// The sequence number of the load last delivered to this target.
    var delivered: UInt64 = 0
  }

  private let lock = NSLock()
  private var loads: [OperationID: Load] = [:]  // guarded by `lock`
  private var targets: [LoadTarget: TargetState] = [:]  // guarded by `lock`
  private var sequence: UInt64 = 0  // guarded by `lock`

  /// Creates a loader with its own resource classes and thread pools.
  public init(configuration: Configuration = Configuration()) {
    self.configuration = configuration
    scheduler = StageScheduler(
      networkLimit: configuration.networkLimit, cpuLimit: configuration.cpuLimit, cpuQueued: configuration.cpuQueued,
      diskLimit: configuration.diskLimit, coalescing: configuration.coalescing)
  }

  /// The options a load gets when none are given: the configuration's time limits.
  public var defaultRunOptions: RunOptions {
    var options = RunOptions(timeout: configuration.timeout, stageTimeout: configuration.stageTimeout)
    options.stageTimeouts = configuration.stageTimeouts
    return options
  }

  /// Operations started and not ended yet.
  public var activeCount: Int { lock.withLock { loads.count } }

  /// Starts running `pipeline` on `source` for `target`, at `priority`.
  ///
  /// `options` adds observers and `willFinish` hooks; its timeouts, when set, override the
  /// loader's. The returned operation is already running.
  @discardableResult
  public func load<Output: Sendable>(
    _ source: ImageSource, pipeline: Pipeline<ImageSource, Output>, priority: LoadPriority = .normal,
    target: LoadTarget? = nil, tag: String? = nil, options: RunOptions? = nil
  ) -> PipelineOperation<Output> {
    load(source, pipeline: pipeline, priority: priority, target: target, tag: tag, options: options, cohort: nil)
  }

  /// Starts a load that is a member of a group started together to share work (``Cohort/members(_:)``:
  /// the variants of one source), so that their first shared stage is shared however they are
  /// scheduled.
  @discardableResult
  package func load<Output: Sendable>(
    _ source: ImageSource, pipeline: Pipeline<ImageSource, Output>, priority: LoadPriority = .normal,
    target: LoadTarget? = nil, tag: String? = nil, options: RunOptions? = nil, cohort: Cohort?
  ) -> PipelineOperation<Output> {
    let ticket = PriorityTicket(priority)
    var run = options ?? defaultRunOptions
    run.observers = configuration.observers + run.observers + [EndObserver(loader: self)]
    run.layers.append(LoadingLayer.Factory(scheduler: scheduler, ticket: ticket, cohort: cohort))
    let sequence = lock.withLock {
      self.sequence += 1
      return self.sequence
    }
    if let target {
      run.onWillFinish { [weak self] (_: any Sendable, info: OperationInfo) in
        try self?.claimDelivery(info.id, sequence: sequence, target: target)
      }
    }
    return PipelineExecutor().start(pipeline.graph, input: source, options: run, as: Output.self) { operation in
      let load = Load(
        sequence: sequence, source: source, target: target, tag: tag, ticket: ticket,
        cancel: { [weak operation] in operation?.cancel() })
      lock.withLock {
        loads[operation.id] = load
        if let target {
          targets[target, default: TargetState(lastSource: source)].lastSource = source
          targets[target]?.active.insert(operation.id)
        }
      }
    }
  }

  /// Loads `source` with no target: to warm the caches (a cache stage in `pipeline` keeps the
  /// result) or to share its work with loads asked for soon after.
  @discardableResult
  public func preload<Output: Sendable>(
    _ source: ImageSource, pipeline: Pipeline<ImageSource, Output>, priority: LoadPriority = .low, tag: String? = nil
  ) -> PipelineOperation<Output> {
    load(source, pipeline: pipeline, priority: priority, target: nil, tag: tag)
  }

  /// Changes the priority of a running load; work it waits for moves in its queues at once.
  public func setPriority(_ priority: LoadPriority, for operation: OperationID) {
    let ticket = lock.withLock { loads[operation]?.ticket }
    ticket?.priority = priority
  }

  /// The most recent source asked for `target`, while it has loads that have not ended.
  public func source(for target: LoadTarget) -> ImageSource? { lock.withLock { targets[target]?.lastSource } }

  /// Cancels every load of `source`.
  public func cancel(source: ImageSource) { cancelLoads { $0.source == source } }

  /// Cancels every load for `target`.
  public func cancel(target: LoadTarget) { cancelLoads { $0.target == target } }

  /// Cancels the loads for `target` tagged `tag`.
  public func cancel(target: LoadTarget, tag: String) { cancelLoads { $0.target == target && $0.tag == tag } }

  /// Cancels every load.
  public func cancelAll() { cancelLoads { _ in true } }

  private func cancelLoads(where matches: (Load) -> Bool) {
    let cancels = lock.withLock { loads.values.filter(matches).map(\.cancel) }
    for cancel in cancels { cancel() }
  }

  /// A load for `target` is about to be delivered: earlier loads for the target still running are
  /// cancelled; a load older than one already delivered is cancelled itself.
  private func claimDelivery(_ id: OperationID, sequence: UInt64, target: LoadTarget) throws {
    let superseded = try lock.withLock { () -> [@Sendable () -> Void] in
      guard var state = targets[target] else { return [] }
      guard sequence > state.delivered else { throw CancellationError() }
      state.delivered = sequence
      targets[target] = state
      return state.active.compactMap { other in
        guard let load = loads[other], load.sequence < sequence else { return nil }
        return load.cancel
      }
    }
    for cancel in superseded { cancel() }
  }

  fileprivate func ended(_ id: OperationID) {
    lock.withLock {
      guard let load = loads.removeValue(forKey: id), let target = load.target else { return }
      targets[target]?.active.remove(id)
      if targets[target]?.active.isEmpty == true { targets[target] = nil }
    }
  }
}

/// Forgets a load when its operation ends.
private struct EndObserver: OperationObserver {
  weak var loader: ImageLoader?

  func receive(_ event: OperationEvent, for operation: OperationInfo) {
    if event.isTerminal { loader?.ended(operation.id) }
  }
}
