import Darkroom
import DarkroomCore
import Foundation

/// Works jobs from a shared queue: claims them (as many at once as slots are free, at most
/// `batchSize`), keeps each lease alive with heartbeats while its job runs, and ends each job with
/// its results or its error.
///
/// - A lease that cannot be renewed (another worker took the job over, or the database stayed out
///   of reach until the lease ran out) cancels its job: its result would be refused anyway.
/// - When the database cannot be reached, the worker claims nothing, keeps what it holds going,
///   retries each completion until its lease runs out, and reconnects with backoff (0.1 s, doubled
///   up to 5 s). Nothing is marked done without its result: both commit together or not at all.
/// - The first SIGINT or SIGTERM stops claiming and lets the jobs in hand finish; the second
///   cancels them and gives them back to the queue (``JobQueue/release(_:)``), so that another
///   worker takes them at once instead of after their lease.
struct QueueWorker: Sendable {
  struct Settings: Sendable {
    /// Jobs whose CPU work runs at once (the loader's CPU limit is the same).
    var slots: Int
    /// Jobs held at once: twice the slots, so that the next job's claim and the last one's
    /// commit overlap the renders instead of leaving a core idle while the database answers.
    var held: Int { slots * 2 }
    /// A claim waits until this many held jobs have ended (as many as the slots): one claim then
    /// refills them together, instead of one claim per job, while the jobs still in hand keep
    /// every slot busy.
    var claimStep: Int { max(1, min(slots, held)) }
    /// How long a claim lasts without a heartbeat.
    var lease: Duration = .seconds(30)
    /// How often leases are renewed; a third of the lease by default.
    var heartbeat: Duration?
    /// The most jobs one claim takes.
    var batchSize: Int
    /// Attempts before a job is dead.
    var maxAttempts: Int = 3
    /// Claim only this batch's jobs.
    var batch: UUID?
    /// The worker's name in the queue's ledger.
    var name: String
    /// How long to wait before asking again when the queue has nothing to claim.
    var idlePoll: Duration = .milliseconds(200)
    /// Whether each failed attempt is said on stderr (`run --queue` lists the dead jobs at the end instead).
    var reportsFailures = true
    /// Stop when claims have failed for this long without a success (`nil`: keep trying, as a
    /// service does).
    var giveUpAfter: Duration?
  }

  /// What the worker did.
  struct Report: Sendable {
    var done = 0
    var failed = 0
    /// Jobs dropped because their lease was lost (another worker has them now).
    var lost = 0
    /// Jobs given back to the queue by a stopping signal.
    var released = 0
    /// Why the worker stopped before it was done: the queue failed for longer than `giveUpAfter`.
    var gaveUp: PipelineError?
  }

  let queue: any JobQueue
  let renderer: JobRenderer
  let loader: ImageLoader
  let settings: Settings
  /// Called with each job this worker completed, once its results are committed.
  var committed: (@Sendable (JobLease, [JobResult]) async -> Void)? = nil

  /// Works until `finished` says so (checked whenever there is nothing to claim) or a signal
  /// stops it.
  func run(signals: StopSignals?, finished: @escaping @Sendable () async -> Bool) async -> Report {
    let report = Protected(Report())
    let work = Task {
      await withTaskGroup(of: Ended.self) { group in
        var running = 0
        var backoff: Duration = .zero
        var failingSince: ContinuousClock.Instant?
        var pauses = 0
        func start(_ leases: [JobLease]) {
          for lease in leases {
            running += 1
            group.addTask { .job(claimed: await runJob(lease, report: report, signals: signals)) }
          }
        }
        /// A job that ended frees its slot, and starts the jobs claimed with its completion.
        func ended(_ child: Ended?) {
          if case .job(let claimed) = child {
            running -= 1
            start(claimed)
          }
        }
        func pause(_ duration: Duration) async {
          pauses += 1
          let number = pauses
          let sleeper = Task<Void, Never> { _ = try? await Task.sleep(for: duration) }
          group.addTask {
            await sleeper.value
            return .pause(number)
          }
          // Until this pause ends or a job does (its slot is free again). A pause cut short is
          // cancelled at once, and its end, coming later, ends no other pause: left sleeping,
          // each cut one made every later pause shorter (idle workers polled ever faster), and
          // the group waited for them when the work was over.
          while true {
            switch await group.next() {
            case .job(let claimed):
              ended(.job(claimed: claimed))
              sleeper.cancel()
              return
            case .pause(let ended) where ended != number:
              continue  // an earlier pause, cut short
            default:
              return
            }
          }
        }
        while !(signals?.stopRequested ?? false), !Task.isCancelled {
          let free = settings.held - running
          if free < settings.claimStep {
            ended(await group.next())
            continue
          }
          let leases: [JobLease]
          do throws(PipelineError) {
            leases = try await queue.claim(
              worker: settings.name, limit: min(free, settings.batchSize), lease: settings.lease,
              maxAttempts: settings.maxAttempts, batch: settings.batch)
            if backoff != .zero { Terminal.error("darkroom worker: the queue answers again") }
            backoff = .zero
            failingSince = nil
          } catch {
            // A claim cut short by a stopping signal is no failure of the queue's.
            if Task.isCancelled || (signals?.stopRequested ?? false) { break }
            let since = failingSince ?? ContinuousClock.now
            failingSince = since
            if let limit = settings.giveUpAfter, ContinuousClock.now - since >= limit {
              report.withLock { $0.gaveUp = error }
              break
            }
            backoff = backoff == .zero ? .milliseconds(100) : min(backoff * 2, .seconds(5))
            Terminal.error("darkroom worker: cannot claim jobs (\(error.message)); trying again in \(backoff)")
            await pause(backoff)
            continue
          }
          start(leases)
          if leases.isEmpty {
            if running == 0, await finished() { break }
            await pause(settings.idlePoll)
          }
        }
        // Jobs claimed with the last completions are worked too: they are this worker's now.
        while let child = await group.next() { ended(child) }
      }
    }
    signals?.onCancel { work.cancel() }
    await work.value
    return report.value
  }

  /// What a child of the worker's task group ended: a job (with the jobs claimed along with its
  /// completion) or a pause (its number).
  private enum Ended: Sendable {
    case job(claimed: [JobLease])
    case pause(Int)
  }

  /// Runs one job and ends it with the queue; the jobs claimed along with its completion.
  private func runJob(_ lease: JobLease, report: Protected<Report>, signals: StopSignals?) async -> [JobLease] {
    let keeper = LeaseKeeper(
      queue: queue, lease: lease, length: settings.lease, interval: settings.heartbeat ?? settings.lease / 3)
    let rendered = await withTaskGroup(of: Result<[JobResult], PipelineError>?.self) { group in
      group.addTask {
        do throws(PipelineError) {
          return .success(try await renderer.render(lease, loader: loader))
        } catch {
          return .failure(error)
        }
      }
      group.addTask {
        await keeper.keep()  // returns when the lease is lost, or when cancelled
        return nil
      }
      var result: Result<[JobResult], PipelineError> = .failure(PipelineError(.cancelled, "the lease was lost"))
      for await item in group {
        if let item {
          result = item
          group.cancelAll()  // the heartbeats
        } else if keeper.isLost {
          group.cancelAll()  // another worker has the job now: this render is wasted
        }
      }
      return result
    }
    if keeper.isLost {
      report.withLock { $0.lost += 1 }
      return []
    }
    // The job is ended with the queue even when a second signal cancelled this worker: outside
    // the cancelled task, so that a result made is committed and a job cut short is given back.
    let cancelled = signals?.cancelRequested ?? false
    // The next job is claimed with this one's completion (one call to the queue instead of two),
    // unless the worker is stopping.
    let next = ClaimRequest(
      limit: signals?.stopRequested ?? false ? 0 : 1, lease: settings.lease, maxAttempts: settings.maxAttempts,
      batch: settings.batch)
    return await Task.detached { [self] in
      await end(lease, with: rendered, claiming: next, keeper: keeper, report: report, cancelled: cancelled)
    }.value
  }

  /// Commits the job's results, records its failure, or gives it back; the jobs claimed along
  /// with a completion.
  private func end(
    _ lease: JobLease, with rendered: Result<[JobResult], PipelineError>, claiming next: ClaimRequest,
    keeper: LeaseKeeper, report: Protected<Report>, cancelled: Bool
  ) async -> [JobLease] {
    switch rendered {
    case .success(let results):
      // Only the first try claims: a try whose answer was lost may have claimed already, and
      // each claiming retry would leave more jobs claimed for nobody until their lease ends.
      var claim = next
      let ended = await retrying(keeper) { () async throws(PipelineError) in
        defer { claim.limit = 0 }
        return try await queue.complete(lease, with: results, thenClaiming: claim)
      }
      switch ended {
      case .success((true, let claimed)):
        report.withLock { $0.done += 1 }
        await committed?(lease, results)
        return claimed
      case .success((false, let claimed)):
        report.withLock { $0.lost += 1 }  // fenced: another worker holds the job now
        return claimed
      case .failure(let error) where error.code == .queueUnavailable:
        report.withLock { $0.lost += 1 }  // the lease ran out while the database was away
      case .failure(let error):
        // The results cannot be stored (too large without a shared folder, a shared folder that
        // cannot be written): the job fails with that error, like a failed render.
        return await end(
          lease, with: .failure(error), claiming: next, keeper: keeper, report: report, cancelled: cancelled)
      }
    case .failure(let error) where error.code == .cancelled && cancelled:
      let released = (try? await queue.release(lease)) ?? false
      report.withLock { $0.released += released ? 1 : 0 }
    case .failure(let error):
      if settings.reportsFailures {
        Terminal.error("failed: \(Terminal.printable(lease.source)): \(error.code): \(Terminal.printable(error.message))")
      }
      let state = await retrying(keeper) { () async throws(PipelineError) in
        try await queue.fail(lease, with: error, maxAttempts: settings.maxAttempts)
      }
      report.withLock { (try? state.get()) == nil ? ($0.lost += 1) : ($0.failed += 1) }
    }
    return []
  }

  /// Calls `body` until it answers, backing off while the queue is out of reach, for as long as
  /// the lease may still be ours; its error when it failed otherwise, or never answered in time.
  private func retrying<T: Sendable>(_ keeper: LeaseKeeper, _ body: () async throws(PipelineError) -> T) async
    -> Result<T, PipelineError>
  {
    var pause: Duration = .milliseconds(100)
    while true {
      do throws(PipelineError) {
        return .success(try await body())
      } catch {
        guard error.code == .queueUnavailable, Date() < keeper.expiry else { return .failure(error) }
        try? await Task.sleep(for: pause)
        pause = min(pause * 2, .seconds(5))
      }
    }
  }
}

/// Renews one lease every `interval` while its job runs, and knows when it is lost: the queue
/// said another worker holds it, or the database stayed out of reach until the lease ran out.
final class LeaseKeeper: Sendable {
  let queue: any JobQueue
  let lease: JobLease
  let length: Duration
  let interval: Duration
  private let state: Protected<(lost: Bool, expiry: Date)>

  init(queue: any JobQueue, lease: JobLease, length: Duration, interval: Duration) {
    self.queue = queue
    self.lease = lease
    self.length = length
    self.interval = interval
    state = Protected((false, lease.expiresAt))
  }

  var isLost: Bool { state.value.lost }
  /// When the lease runs out unless renewed (as far as this worker knows).
  var expiry: Date { state.value.expiry }

  /// Renews the lease until it is lost or the task is cancelled.
  func keep() async {
    while !Task.isCancelled {
      do {
        try await Task.sleep(for: interval)
      } catch {
        return
      }
      let asked = Date()
      do throws(PipelineError) {
        if try await queue.heartbeat(lease, extendingBy: length) {
          state.withLock { $0.expiry = asked.addingTimeInterval(length.milliseconds / 1000) }
        } else {
          state.withLock { $0.lost = true }
          return
        }
      } catch {
        if error.code == .cancelled { return }
        if Date() >= expiry {
          state.withLock { $0.lost = true }
          return
        }
      }
    }
  }
}
