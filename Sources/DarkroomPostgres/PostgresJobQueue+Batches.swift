import DarkroomCore
import Foundation
import PostgresNIO

/// Reading a batch back: finding it, listing its jobs, reading results, retrying the dead.
extension PostgresJobQueue {
  public func batch(_ idOrName: String) async throws(PipelineError) -> UUID {
    let logger = logger
    let id = UUID(uuidString: idOrName)
    let name = idOrName.storable(maxBytes: Self.maxNameBytes)
    let found: UUID? = try await database("find a batch") {
      var found: UUID?
      for try await row in try await self.client.query(
        "SELECT id FROM darkroom_batches WHERE id = \(id) OR (\(id)::uuid IS NULL AND name = \(name))", logger: logger
      ).decode(UUID.self) {
        found = row
      }
      return found
    }
    guard let found else {
      throw PipelineError(.notFound, "the queue holds no batch with the id or name \(idOrName.prefix(80))")
    }
    return found
  }

  public func jobs(of batch: UUID, states: Set<JobState>, after: Int64, limit: Int) async throws(PipelineError) -> [JobRecord] {
    guard (1...10_000).contains(limit) else { throw PipelineError(.invalidInput, "a page is 1 to 10000 jobs, not \(limit)") }
    let logger = logger
    let wanted = states.map(\.rawValue).sorted()
    return try await database("list a batch's jobs") {
      var jobs: [JobRecord] = []
      for try await (id, source, name, state, attempts, code, error) in try await self.client.query(
        """
        SELECT id, source, name, state, attempts, last_error_code, last_error FROM darkroom_jobs
        WHERE batch_id = \(batch) AND id > \(after) AND (cardinality(\(wanted)::text[]) = 0 OR state = ANY(\(wanted)::text[]))
        ORDER BY id LIMIT \(limit)
        """, logger: logger
      ).decode((Int64, String, String, String, Int, String?, String?).self) {
        jobs.append(
          JobRecord(
            id: id, source: source, name: name, state: JobState(rawValue: state) ?? .queued, attempts: attempts, errorCode: code,
            error: error))
      }
      return jobs
    }
  }

  public func results(of jobs: [Int64]) async throws(PipelineError) -> [Int64: Result<[JobResult], PipelineError>] {
    guard jobs.count <= 100 else { throw PipelineError(.invalidInput, "results are read for at most 100 jobs at a time") }
    guard !jobs.isEmpty else { return [:] }
    let logger = logger
    let rows: [(Int64, String, ByteBuffer?, String, Int64)] = try await database("read results") {
      var rows: [(Int64, String, ByteBuffer?, String, Int64)] = []
      for try await row in try await self.client.query(
        "SELECT job_id, name, bytes, sha256, size FROM darkroom_results WHERE job_id = ANY(\(jobs)) ORDER BY job_id, name",
        logger: logger
      ).decode((Int64, String, ByteBuffer?, String, Int64).self) {
        rows.append(row)
      }
      return rows
    }
    var results: [Int64: Result<[JobResult], PipelineError>] = [:]
    for (job, name, bytes, digest, size) in rows {
      if case .failure = results[job] { continue }
      do throws(PipelineError) {
        let result = try await storage.load(name: name, bytes: bytes, digest: digest, size: size, job: job)
        results[job] = .success(((try? results[job]?.get()) ?? []) + [result])
      } catch {
        if error.code == .cancelled { throw error }
        results[job] = .failure(error)
      }
    }
    return results
  }

  /// The first stored result of `job` (see ``results(of:)``); `nil` when it has none.
  public func result(of job: Int64) async throws(PipelineError) -> JobResult? {
    try await results(of: job).first
  }

  public func openJobs() async throws(PipelineError) -> Int {
    let logger = logger
    return try await database("count open jobs") {
      var count: Int64 = 0
      for try await open in try await self.client.query(
        "SELECT count(*)::bigint FROM darkroom_jobs WHERE state IN ('queued', 'running')", logger: logger
      ).decode(Int64.self) {
        count = open
      }
      return Int(count)
    }
  }

  public func retry(batch: UUID) async throws(PipelineError) -> Int {
    _ = try await status(of: batch)  // notFound for an unknown batch
    let logger = logger
    return try await database("retry a batch's dead jobs") {
      try await self.client.withTransaction(logger: logger) { connection in
        var count = 0
        for try await _ in try await connection.query(
          """
          WITH revived AS (
            UPDATE darkroom_jobs SET state = 'queued', attempts = 0, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
            WHERE batch_id = \(batch) AND state = 'dead' RETURNING id, attempts
          ), logged AS (
            INSERT INTO darkroom_ledger (job_id, event, worker, attempt) SELECT id, 'retried', '', 0 FROM revived
          )
          SELECT id FROM revived
          """, logger: logger)
        {
          count += 1
        }
        return count
      }
    }
  }
}
