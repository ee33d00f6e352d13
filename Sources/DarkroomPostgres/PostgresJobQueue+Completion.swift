import DarkroomCore
import Foundation
import PostgresNIO

extension PostgresJobQueue {
  /// Completes `lease` and claims the next jobs in one statement: one round trip and one commit
  /// per job for a worker that keeps busy, where a completion and a claim apart were two.
  ///
  /// The completion is fenced as ``complete(_:with:)``'s is, and the claim is
  /// ``claim(worker:limit:lease:maxAttempts:batch:)``'s for the lease's worker; it happens whether
  /// or not the completion was refused, and never takes the job being completed.
  ///
  /// ```swift
  /// var lease = try await queue.claim(worker: "host-1", limit: 1, lease: .seconds(30), maxAttempts: 3).first
  /// while let current = lease {
  ///   let next = ClaimRequest(limit: 1, lease: .seconds(30), maxAttempts: 3)
  ///   lease = try await queue.complete(current, with: render(current), thenClaiming: next).claimed.first
  /// }
  /// ```
  public func complete(_ lease: JobLease, with results: [JobResult], thenClaiming request: ClaimRequest)
    async throws(PipelineError) -> (completed: Bool, claimed: [JobLease])
  {
    guard request.limit > 0 else { return (try await complete(lease, with: results), []) }
    let seconds = try Self.leaseSeconds(request.lease)
    guard request.limit <= 1_000 else {
      throw PipelineError(.invalidInput, "a claim takes 1 to 1000 jobs, not \(request.limit)")
    }
    try Self.checkAttempts(request.maxAttempts)
    let completion = try await completion(of: lease, with: results)
    let known = knownPipelines
    let claim = ClaimStatement(
      maxAttempts: request.maxAttempts, batch: request.batch, limit: request.limit, seconds: seconds,
      known: Array(known.keys), worker: completion.worker)
    return try await database("store a result and claim jobs") {
      let rows = try await self.execute(CompleteAndClaimStatement(complete: completion, claim: claim))
      var completed = false
      var claimed: [ClaimStatement.Row] = []
      for (isDone, job, batch, source, attempt, token, expires, name, pipeline, pipelineName) in rows {
        if isDone {
          completed = true
        } else if let batch, let source, let attempt, let token, let expires, let name {
          claimed.append((job, batch, source, attempt, token, expires, name, pipeline, pipelineName))
        }
      }
      let leases = self.leases(claimed.sorted { $0.0 < $1.0 }, known: known, worker: completion.worker)
      if completed { return (true, leases) }
      return (try await self.refused(lease), leases)
    }
  }

  /// The statement that completes `lease` with `results`: the results placed first (a large one
  /// goes to the shared folder).
  func completion(of lease: JobLease, with results: [JobResult]) async throws(PipelineError) -> CompleteStatement {
    let stored = try await storage.place(results)
    return CompleteStatement(
      resultCount: stored.count, job: lease.job, token: lease.token, names: stored.map(\.name),
      // Results kept in the shared folder travel as empty buffers, stored as NULL.
      bytes: stored.map { ByteBuffer(bytes: $0.bytes ?? []) }, shared: stored.map { $0.bytes == nil },
      digests: stored.map(\.digest), sizes: stored.map(\.size), keep: stored.map { !$0.overwrite },
      worker: lease.worker.storable(maxBytes: 200), attempt: lease.attempt)
  }

  /// Why a completion changed nothing: the job is not running under this lease. Done by this
  /// very lease (a retried call whose reply was lost) is success; anything else is a refusal,
  /// recorded in the ledger when the job exists.
  func refused(_ lease: JobLease) async throws -> Bool {
    let logger = logger
    return try await client.withTransaction(logger: logger) { connection in
      var doneByThisLease = false
      for try await state in try await connection.query(
        "SELECT state FROM darkroom_jobs WHERE id = \(lease.job) AND lease_token = \(lease.token)", logger: logger
      ).decode(String.self) {
        doneByThisLease = state == JobState.done.rawValue
      }
      if doneByThisLease { return true }
      try await Self.record(
        "fenced", lease, worker: lease.worker.storable(maxBytes: 200), detail: "complete", on: connection, logger: logger)
      return false
    }
  }

  /// The batches whose pipelines this process has read (sent with a claim, so that theirs are not
  /// sent again).
  var knownPipelines: [UUID: (text: String, name: String)] { pipelines.value }

  /// Claimed rows as leases, each with its batch's pipeline: from the row when the claim sent it
  /// (kept for the next claims: a batch's pipeline never changes), or from `known`, what this
  /// process had when it claimed.
  func leases(_ claimed: [ClaimStatement.Row], known: [UUID: (text: String, name: String)], worker: String) -> [JobLease] {
    var known = known
    var read: [(UUID, (text: String, name: String))] = []
    for (_, batch, _, _, _, _, _, pipeline, name) in claimed where known[batch] == nil {
      guard let pipeline else { continue }
      known[batch] = (pipeline, name ?? "pipeline")
      read.append((batch, (pipeline, name ?? "pipeline")))
    }
    if !read.isEmpty {
      pipelines.withLock { cache in
        for (batch, pipeline) in read {
          if cache.count >= Self.cachedPipelines { cache.removeAll() }  // bounded: pipelines are up to 1 MiB each
          cache[batch] = pipeline
        }
      }
    }
    return claimed.map { job, batch, source, attempt, token, expires, name, _, _ in
      JobLease(
        job: job, batch: batch, source: source, pipeline: known[batch]?.text ?? "", worker: worker, attempt: attempt,
        token: token, expiresAt: expires, name: name, pipelineName: known[batch]?.name ?? "pipeline")
    }
  }
}
