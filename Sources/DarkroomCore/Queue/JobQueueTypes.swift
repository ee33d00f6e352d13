import Foundation

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
  /// The name its outputs take (`{name}`), chosen when the batch was enqueued.
  public var name: String
  /// The pipeline's name (`{pipeline}`).
  public var pipelineName: String

  public init(
    job: Int64, batch: UUID, source: String, pipeline: String, worker: String, attempt: Int, token: UUID, expiresAt: Date,
    name: String = "", pipelineName: String = "pipeline"
  ) {
    self.name = name
    self.pipelineName = pipelineName
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

/// The jobs a worker asks for along with a completion
/// (``JobQueue/complete(_:with:thenClaiming:)``): how many, for how long, after how many
/// attempts a job is dead, and from which batch (any when `nil`).
///
/// ```swift
/// let next = ClaimRequest(limit: 1, lease: .seconds(30), maxAttempts: 3)
/// let (completed, claimed) = try await queue.complete(lease, with: results, thenClaiming: next)
/// ```
public struct ClaimRequest: Sendable, Hashable {
  /// 0 claims nothing (a worker that is stopping).
  public var limit: Int
  public var lease: Duration
  public var maxAttempts: Int
  public var batch: UUID?

  public init(limit: Int, lease: Duration, maxAttempts: Int, batch: UUID? = nil) {
    self.limit = limit
    self.lease = lease
    self.maxAttempts = maxAttempts
    self.batch = batch
  }
}

/// A source to enqueue, and the name its outputs take (`{name}` in their file names).
///
/// The runner chooses the names of a whole batch at once, before anything runs, so that two
/// sources never share an output file however the work is spread.
///
/// ```swift
/// let sources = [JobSource("/photos/a.jpg"), JobSource("/more/a.jpg", name: "a-3f9c1e07")]
/// ```
public struct JobSource: Sendable, Hashable {
  /// An absolute path or a URL: what every worker can open.
  public var source: String
  /// `{name}` for its outputs; empty for the source's own base name.
  public var name: String

  public init(_ source: String, name: String = "") {
    self.source = source
    self.name = name
  }
}

/// One job of a batch, as ``JobQueue/jobs(of:states:after:limit:)`` lists it.
///
/// ```swift
/// for job in try await queue.jobs(of: batch, states: [.dead], after: 0, limit: 100) {
///   print(job.source, job.errorCode ?? "", job.error ?? "")   // /photos/b.jpg corruptImage …
/// }
/// ```
public struct JobRecord: Sendable, Hashable {
  public var id: Int64
  public var source: String
  public var name: String
  public var state: JobState
  public var attempts: Int
  /// The last failed attempt's error code and message.
  public var errorCode: String?
  public var error: String?

  public init(
    id: Int64, source: String, name: String, state: JobState, attempts: Int, errorCode: String? = nil, error: String? = nil
  ) {
    self.id = id
    self.source = source
    self.name = name
    self.state = state
    self.attempts = attempts
    self.errorCode = errorCode
    self.error = error
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
  /// Whether an existing file of that name is replaced (a `write` stage with `"overwrite":
  /// false` keeps it, and its output then fails to be written).
  public var overwrite: Bool

  public init(bytes: [UInt8], name: String = "", overwrite: Bool = true) {
    self.bytes = bytes
    self.name = name
    self.overwrite = overwrite
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
