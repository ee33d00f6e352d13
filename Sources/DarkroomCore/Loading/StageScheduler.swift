import Foundation

/// How a loader runs stages: a bounded `ResourceClass` per kind of resource, a pool of threads
/// for CPU work and one for disk I/O, and (optionally) the sharing of identical in-flight work.
///
/// Every ``ImageLoader`` owns one; each run it starts has a ``LoadingLayer`` that asks it to
/// perform each stage call with the run's ``PriorityTicket``: the stage's ``Stage/resource(for:)``
/// picks the class whose slot it waits for (at the ticket's priority) and the pool its blocking
/// work runs on. `.light` stages never wait.
///
/// ```swift
/// let scheduler = StageScheduler(networkLimit: 8, cpuLimit: 2, diskLimit: 4)
/// let value = try await scheduler.perform(.cpu, context: context, ticket: PriorityTicket(.high)) { context in
///   try await stage.process(input, context: context)
/// }
/// ```
package final class StageScheduler: Sendable {
  /// Network transfers at once.
  public let network: ResourceClass
  /// CPU-bound stage work at once (decode, resize, encode…).
  public let cpu: ResourceClass
  /// Disk reads and writes at once.
  public let disk: ResourceClass
  /// The threads CPU work runs on: as many as the CPU class allows.
  public let cpuPool: BlockingPool
  /// The threads disk work runs on: as many as the disk class allows. Kept apart from the CPU
  /// pool so that a cheap read never waits behind an expensive decode.
  public let ioPool: BlockingPool
  /// The shared in-flight work, keyed by source identity and stage chain; `nil` when off.
  public let coalescer: Coalescer<String, any Sendable>?

  /// Creates a scheduler with the given limits (each at least 1). `cpuQueued` more CPU calls than
  /// `cpuLimit` are let in to wait in the CPU pool's queue, which keeps `cpuLimit` threads.
  /// `coalescing: false` runs every operation's stages on their own, for comparison.
  public init(
    networkLimit: Int = 8, cpuLimit: Int = ProcessInfo.processInfo.activeProcessorCount, cpuQueued: Int = 0,
    diskLimit: Int = 4, coalescing: Bool = true
  ) {
    network = ResourceClass(name: "network", limit: networkLimit)
    cpu = ResourceClass(name: "cpu", limit: max(1, cpuLimit) + min(max(0, cpuQueued), 64))
    disk = ResourceClass(name: "disk", limit: diskLimit)
    let cpuPool = BlockingPool(threads: max(1, cpuLimit), name: "darkroom.cpu")
    self.cpuPool = cpuPool
    ioPool = BlockingPool(threads: max(1, diskLimit), name: "darkroom.io")
    coalescer =
      coalescing
      ? Coalescer<String, any Sendable>(share: { shared, consumers in
        guard var result = shared as? RunValue, let shareable = result.value as? any ShareableValue else {
          return shared
        }
        result.value = try await shareable.preparedForSharing(consumers: consumers, pool: cpuPool)
        return result
      }) : nil
  }

  deinit {
    cpuPool.shutdown()
    ioPool.shutdown()
  }

  /// The class bounding `resource`, or `nil` for light work.
  public func resourceClass(for resource: StageResource) -> ResourceClass? {
    switch resource {
    case .network: network
    case .cpu: cpu
    case .disk: disk
    case .light: nil
    }
  }

  /// Runs `body` once a slot of the class bounding `resource` is free (at once for `.light`
  /// work), with the context's pool set to the matching one: disk work on ``ioPool``, the rest on
  /// ``cpuPool``.
  public func perform<T: Sendable>(
    _ resource: StageResource, context: StageContext, ticket: PriorityTicket,
    _ body: (StageContext) async throws -> T
  ) async throws -> T {
    var context = context
    context.pool = resource == .disk ? ioPool : cpuPool
    guard let gate = resourceClass(for: resource) else { return try await body(context) }
    let bound = context
    return try await gate.run(ticket) { try await body(bound) }
  }
}

/// A value that must be prepared before several consumers use it at once: shared in-flight work
/// hands it to more than one operation.
///
/// A lazily decoded image, for example, may be read only once from top to bottom; it is made into
/// an image in memory first.
///
/// ```swift
/// extension MyLazyImage: ShareableValue {
///   func preparedForSharing(consumers: Int, pool: BlockingPool) async throws -> MyLazyImage {
///     try await pool.run { try self.loadedIntoMemory() }
///   }
/// }
/// ```
package protocol ShareableValue: Sendable {
  /// A copy safe to give to `consumers` operations at once; blocking work goes to `pool`.
  func preparedForSharing(consumers: Int, pool: BlockingPool) async throws -> Self
}
