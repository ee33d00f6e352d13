import Foundation

/// A durable queue of image jobs that many processes, on many machines, work from together.
///
/// A batch is a pipeline and its sources; each source is one job. A worker claims jobs with a
/// lease (a token and an expiry), renews the lease while it works (``heartbeat(_:extendingBy:)``)
/// and ends each job with its result (``complete(_:with:)``) or its error
/// (``fail(_:with:maxAttempts:)``). Delivery is at least once: a worker that dies stops renewing,
/// its lease expires, and another worker claims the job again. Completion is exactly once: a
/// result is taken only with the job's current lease token, in the same transaction that marks
/// the job done, so a worker whose lease was taken over is refused (fenced) and its late result
/// is dropped.
///
/// `DarkroomPostgres`' `PostgresJobQueue` implements it on PostgreSQL; another engine can be
/// added the same way.
///
/// ```swift
/// let batch = try await queue.enqueue(batch: "thumbs", pipeline: pipelineJSON, sources: ["/photos/a.jpg", "/photos/b.jpg"])
/// for lease in try await queue.claim(worker: "host-1", limit: 4, lease: .seconds(30), maxAttempts: 3) {
///   let bytes = try await render(lease.source, lease.pipeline)
///   _ = try await queue.complete(lease, with: JobResult(bytes: bytes))
/// }
/// print(try await queue.status(of: batch.id))   // done 2
/// ```
public protocol JobQueue: Sendable {
  /// Creates or migrates the queue's schema; safe to call from many processes at once.
  func prepare() async throws(PipelineError)

  /// Adds `sources` to the batch named `batch` (made on first use, for `pipeline`, whose
  /// `{pipeline}` name is `pipelineName`). A source already in the batch is not added again,
  /// and a finished one is not redone. A batch name holds one pipeline: another is refused.
  func enqueue(batch: String, pipeline: String, pipelineName: String, sources: [JobSource]) async throws(PipelineError)
    -> EnqueuedBatch

  /// Claims at most `limit` jobs that are waiting, or whose lease has expired, for `lease`, from
  /// any batch, or only from `batch`. A job whose lease expired on its `maxAttempts`-th attempt
  /// (its worker keeps dying on it) is made dead instead of claimed again.
  func claim(worker: String, limit: Int, lease: Duration, maxAttempts: Int, batch: UUID?) async throws(PipelineError)
    -> [JobLease]

  /// Renews `lease` for `duration` from now; false when the lease is no longer this worker's.
  func heartbeat(_ lease: JobLease, extendingBy duration: Duration) async throws(PipelineError) -> Bool

  /// Stores the job's results (one per output: a pipeline with variants makes several, one
  /// that writes its own files none) and marks it done, in one transaction, if `lease` is still
  /// the job's; false (and nothing stored) when another worker holds it now. A call repeated
  /// with the lease that completed the job (a retry after a lost reply) answers true again.
  func complete(_ lease: JobLease, with results: [JobResult]) async throws(PipelineError) -> Bool

  /// Completes `lease` as ``complete(_:with:)`` does and, in the same call, claims up to
  /// `request.limit` more jobs for the lease's worker as
  /// ``claim(worker:limit:lease:maxAttempts:batch:)`` does, whether or not the completion was
  /// refused: a worker that keeps busy makes one call per job instead of two. The job completed
  /// is never among those claimed. An engine that cannot do both at once gets the two calls
  /// (the default).
  func complete(_ lease: JobLease, with results: [JobResult], thenClaiming request: ClaimRequest)
    async throws(PipelineError) -> (completed: Bool, claimed: [JobLease])

  /// Gives a job back unfinished (a worker stopping before it is done): it waits for another
  /// worker, and this attempt is not counted. False when the lease is no longer this worker's.
  func release(_ lease: JobLease) async throws(PipelineError) -> Bool

  /// Ends an attempt with `error`: the job waits for another attempt, or is dead when the error
  /// is permanent (``PipelineError/Code/isPermanent``) or it has had `maxAttempts`. `nil` when
  /// the lease is no longer this worker's.
  func fail(_ lease: JobLease, with error: PipelineError, maxAttempts: Int) async throws(PipelineError) -> JobState?

  /// How many of the batch's jobs are in each state; `notFound` for a batch the queue does not hold.
  func status(of batch: UUID) async throws(PipelineError) -> BatchStatus

  /// The batch with this id, or (for text that is not an id) this name; `notFound` when there
  /// is none.
  func batch(_ idOrName: String) async throws(PipelineError) -> UUID

  /// The batch's jobs in the order they were enqueued, `limit` at a time after the job `after`
  /// (0 for the first page), only those in `states` when it is not empty.
  func jobs(of batch: UUID, states: Set<JobState>, after: Int64, limit: Int) async throws(PipelineError) -> [JobRecord]

  /// Done jobs' results (at most 100 jobs at a time), each checked against its SHA-256: per job,
  /// its results or why they cannot be read (`cacheCorrupt` when one does not match, `notFound`
  /// when a shared file is missing). A job without results is absent.
  func results(of jobs: [Int64]) async throws(PipelineError) -> [Int64: Result<[JobResult], PipelineError>]

  /// How many jobs of every batch are queued or running: 0 when no worker has anything left to do.
  func openJobs() async throws(PipelineError) -> Int

  /// Queues the batch's dead jobs again, with their attempts counted from zero; returns how many.
  func retry(batch: UUID) async throws(PipelineError) -> Int
}

extension JobQueue {
  /// Enqueues plain sources, each named (`{name}`) from its own file name or URL, under the
  /// pipeline name "pipeline".
  public func enqueue(batch: String, pipeline: String, sources: [String]) async throws(PipelineError) -> EnqueuedBatch {
    try await enqueue(batch: batch, pipeline: pipeline, pipelineName: "pipeline", sources: sources.map { JobSource($0) })
  }

  /// Claims from any batch.
  public func claim(worker: String, limit: Int, lease: Duration, maxAttempts: Int) async throws(PipelineError) -> [JobLease] {
    try await claim(worker: worker, limit: limit, lease: lease, maxAttempts: maxAttempts, batch: nil)
  }

  /// One done job's results, each checked against its SHA-256.
  public func results(of job: Int64) async throws(PipelineError) -> [JobResult] {
    try await results(of: [job])[job]?.get() ?? []
  }

  /// Completes, then claims: two calls.
  public func complete(_ lease: JobLease, with results: [JobResult], thenClaiming request: ClaimRequest)
    async throws(PipelineError) -> (completed: Bool, claimed: [JobLease])
  {
    let completed = try await complete(lease, with: results)
    guard request.limit > 0 else { return (completed, []) }
    let claimed = try await claim(
      worker: lease.worker, limit: request.limit, lease: request.lease, maxAttempts: request.maxAttempts,
      batch: request.batch)
    return (completed, claimed.filter { $0.job != lease.job })
  }

  /// Completes a job with one result.
  public func complete(_ lease: JobLease, with result: JobResult) async throws(PipelineError) -> Bool {
    try await complete(lease, with: [result])
  }
}
