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
        // An id first; a name that reads as an id is found as a name when no batch has that id.
        "SELECT id FROM darkroom_batches WHERE id = \(id) OR name = \(name) ORDER BY (id = \(id)) DESC NULLS LAST LIMIT 1",
        logger: logger
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

  /// Reads results in rounds of at most this many bytes: what a table holds decides how much is
  /// read at once only up to this bound.
  static let resultRoundBytes = 64 << 20

  public func results(of jobs: [Int64]) async throws(PipelineError) -> [Int64: Result<[JobResult], PipelineError>] {
    guard jobs.count <= 100 else { throw PipelineError(.invalidInput, "results are read for at most 100 jobs at a time") }
    guard !jobs.isEmpty else { return [:] }
    let logger = logger
    let limit = ResultStorage.maxStoredBytesLimit
    // First what the rows say and how long their bytes really are, without the bytes.
    typealias Row = (job: Int64, name: String, digest: String, size: Int64, keep: Bool, shared: Bool, length: Int64)
    let (rows, expected): ([Row], [Int64: Int]) = try await database("read results") {
      var rows: [Row] = []
      for try await row in try await self.client.query(
        """
        SELECT job_id, name, sha256, size, keep_existing, bytes IS NULL, coalesce(octet_length(bytes), 0)::bigint
        FROM darkroom_results WHERE job_id = ANY(\(jobs)) ORDER BY job_id, name LIMIT 10001
        """, logger: logger
      ).decode((Int64, String, String, Int64, Bool, Bool, Int64).self) {
        rows.append(row)
      }
      var expected: [Int64: Int] = [:]
      for try await (job, count) in try await self.client.query(
        "SELECT id, result_count FROM darkroom_jobs WHERE id = ANY(\(jobs)) AND result_count IS NOT NULL", logger: logger
      ).decode((Int64, Int).self) {
        expected[job] = count
      }
      return (rows, expected)
    }
    guard rows.count <= 10_000 else {
      throw PipelineError(.cacheCorrupt, "the queue holds more than 10,000 results for 100 jobs: its tables were changed")
    }
    var results: [Int64: Result<[JobResult], PipelineError>] = [:]
    func damage(_ job: Int64, _ message: String) { results[job] = .failure(PipelineError(.cacheCorrupt, message)) }
    var wanted: [Row] = []
    for row in rows {
      if row.shared || (row.length == row.size && row.size <= Int64(limit)) {
        wanted.append(row)
      } else {
        damage(row.job, "the stored result \(row.name) of job \(row.job) is \(row.length) bytes, not its recorded \(row.size)")
      }
    }
    // Then the bytes, a round of at most resultRoundBytes at a time.
    var start = 0
    while start < wanted.count {
      var end = start
      var bytes: Int64 = 0
      while end < wanted.count, end == start || bytes + wanted[end].length <= Int64(Self.resultRoundBytes) {
        bytes += wanted[end].length
        end += 1
      }
      let round = Array(wanted[start..<end])
      start = end
      let ids = round.map(\.job)
      let names = round.map(\.name)
      let fetched: [String: ByteBuffer] = try await database("read results") {
        var fetched: [String: ByteBuffer] = [:]
        for try await (job, name, buffer) in try await self.client.query(
          """
          SELECT r.job_id, r.name, r.bytes FROM darkroom_results r
          JOIN unnest(\(ids)::bigint[], \(names)::text[]) AS w (job_id, name) ON r.job_id = w.job_id AND r.name = w.name
          WHERE r.bytes IS NOT NULL AND octet_length(r.bytes) <= \(Int64(limit))
          """, logger: logger
        ).decode((Int64, String, ByteBuffer).self) {
          fetched["\(job)/\(name)"] = buffer
        }
        return fetched
      }
      for row in round {
        if case .failure = results[row.job] { continue }
        do throws(PipelineError) {
          let result = try await storage.load(
            name: row.name, bytes: row.shared ? nil : fetched["\(row.job)/\(row.name)"] ?? ByteBuffer(), digest: row.digest,
            size: row.size, job: row.job, overwrite: !row.keep)
          results[row.job] = .success(((try? results[row.job]?.get()) ?? []) + [result])
        } catch {
          if error.code == .cancelled { throw error }
          results[row.job] = .failure(error)
        }
      }
    }
    // A done job holds as many results as it stored.
    for (job, count) in expected {
      let found = rows.reduce(0) { $0 + ($1.job == job ? 1 : 0) }
      if found != count, case .success = results[job] ?? .success([]) {
        damage(job, "job \(job) stored \(count) result\(count == 1 ? "" : "s"); the queue holds \(found)")
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
