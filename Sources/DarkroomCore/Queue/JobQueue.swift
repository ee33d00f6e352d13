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
/// let batch = try await queue.enqueue(batch: "thumbs", pipeline: pipelineJSON, sources: ["a.jpg", "b.jpg"])
/// for lease in try await queue.claim(worker: "host-1", limit: 4, lease: .seconds(30), maxAttempts: 3) {
///   let bytes = try await render(lease.source, lease.pipeline)
///   _ = try await queue.complete(lease, with: JobResult(bytes: bytes))
/// }
/// print(try await queue.status(of: batch.id))   // done 2
/// ```
public protocol JobQueue: Sendable {
  /// Creates or migrates the queue's schema; safe to call from many processes at once.
  func prepare() async throws(PipelineError)

  /// Adds `sources` to the batch named `batch` (made on first use, for `pipeline`). A source
  /// already in the batch is not added again, and a finished one is not redone.
  func enqueue(batch: String, pipeline: String, sources: [String]) async throws(PipelineError) -> EnqueuedBatch

  /// Claims at most `limit` jobs that are waiting, or whose lease has expired, for `lease`. A
  /// job whose lease expired on its `maxAttempts`-th attempt (its worker keeps dying on it) is
  /// made dead instead of claimed again.
  func claim(worker: String, limit: Int, lease: Duration, maxAttempts: Int) async throws(PipelineError) -> [JobLease]

  /// Renews `lease` for `duration` from now; false when the lease is no longer this worker's.
  func heartbeat(_ lease: JobLease, extendingBy duration: Duration) async throws(PipelineError) -> Bool

  /// Stores the job's result and marks it done, in one transaction, if `lease` is still the
  /// job's; false (and nothing stored) when another worker holds it now. A call repeated with
  /// the lease that completed the job (a retry after a lost reply) answers true again.
  func complete(_ lease: JobLease, with result: JobResult) async throws(PipelineError) -> Bool

  /// Ends an attempt with `error`: the job waits for another attempt, or is dead when the error
  /// is permanent (``PipelineError/Code/isPermanent``) or it has had `maxAttempts`. `nil` when
  /// the lease is no longer this worker's.
  func fail(_ lease: JobLease, with error: PipelineError, maxAttempts: Int) async throws(PipelineError) -> JobState?

  /// How many of the batch's jobs are in each state; `notFound` for a batch the queue does not hold.
  func status(of batch: UUID) async throws(PipelineError) -> BatchStatus
}

/// A batch after ``JobQueue/enqueue(batch:pipeline:sources:)``: its id and how many sources were new.
///
/// ```swift
/// let batch = try await queue.enqueue(batch: "thumbs", pipeline: json, sources: ["a.jpg", "a.jpg"])
/// print(batch.added)   // 1: a source is queued once
/// ```
public struct EnqueuedBatch: Sendable, Hashable {
  public var id: UUID
  /// Sources added by this call (those already in the batch are not counted).
  public var added: Int

  public init(id: UUID, added: Int) {
    self.id = id
    self.added = added
  }
}

/// A claimed job: what to run, and the lease that lets this worker end it.
///
/// ```swift
/// for lease in try await queue.claim(worker: "host-1", limit: 2, lease: .seconds(30), maxAttempts: 3) {
///   print(lease.source, lease.attempt)   // a.jpg 1
/// }
/// ```
public struct JobLease: Sendable, Hashable {
  public var job: Int64
  public var batch: UUID
  public var source: String
  /// The batch's pipeline, as enqueued (JSON).
  public var pipeline: String
  /// The worker that claimed it (written in the queue's ledger).
  public var worker: String
  /// 1 for the first attempt.
  public var attempt: Int
  /// Fences this attempt: only the current token can end the job.
  public var token: UUID
  public var expiresAt: Date

  public init(
    job: Int64, batch: UUID, source: String, pipeline: String, worker: String, attempt: Int, token: UUID, expiresAt: Date
  ) {
    self.job = job
    self.batch = batch
    self.source = source
    self.pipeline = pipeline
    self.worker = worker
    self.attempt = attempt
    self.token = token
    self.expiresAt = expiresAt
  }
}

/// A job's output: the encoded bytes, checked by their SHA-256 whenever they are read back.
///
/// ```swift
/// let done = try await queue.complete(lease, with: JobResult(bytes: jpegBytes, name: "a.jpg"))
/// ```
public struct JobResult: Sendable, Hashable {
  public var bytes: [UInt8]
  /// The output's file name (for `batch results --output`).
  public var name: String

  public init(bytes: [UInt8], name: String = "") {
    self.bytes = bytes
    self.name = name
  }
}

/// Where a job is.
///
/// ```swift
/// let state = try await queue.fail(lease, with: PipelineError(.corruptImage, "bad bytes"), maxAttempts: 3)
/// print(state == .dead)   // true: a damaged image is not retried
/// ```
public enum JobState: String, Sendable, Hashable, CaseIterable {
  /// Waiting for a worker (new, or after a failed attempt that may be retried).
  case queued
  /// Claimed, under a lease.
  case running
  /// Finished, with its result stored.
  case done
  /// Failed for good: a permanent error, or out of attempts. Its last error is kept.
  case dead
}

/// A batch's jobs by state.
///
/// ```swift
/// let status = try await queue.status(of: batch.id)
/// print(status, status.isFinished)   // queued 0, running 0, done 49, dead 1 true
/// ```
public struct BatchStatus: Sendable, Hashable, CustomStringConvertible {
  public var counts: [JobState: Int]

  public init(counts: [JobState: Int]) { self.counts = counts }

  public subscript(state: JobState) -> Int { counts[state] ?? 0 }

  /// Jobs in the batch.
  public var total: Int { counts.values.reduce(0, +) }

  /// Whether every job is done or dead.
  public var isFinished: Bool { self[.queued] == 0 && self[.running] == 0 }

  public var description: String {
    JobState.allCases.map { "\($0.rawValue) \(self[$0])" }.joined(separator: ", ")
  }
}

extension PipelineError.Code {
  /// Whether trying again cannot help: the input or the pipeline is at fault (a damaged or
  /// unsupported image, one too large, a missing source, a refused destination), not the
  /// moment (a timeout, an origin's 5xx, a full disk). A queue does not retry these.
  public var isPermanent: Bool {
    Self.permanent.contains(self)
  }

  private static let permanent: Set<PipelineError.Code> = [
    .invalidDefinition, .unknownStage, .typeMismatch, .invalidInput, .notFound, .accessDenied, .forbiddenDestination,
    .tooManyRedirects, .tooLarge, .unsupportedFormat, .corruptImage, .imageTooLarge,
  ]
}
