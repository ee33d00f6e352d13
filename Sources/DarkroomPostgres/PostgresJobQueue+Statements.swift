import Foundation
import PostgresNIO

/// The statements a worker runs for every job, prepared once per connection (postgres-nio names
/// them by their type and prepares them on first use): PostgreSQL then neither parses nor plans
/// them again for each job, which was most of the database's own work per job.
extension PostgresJobQueue {
  /// Claims up to `limit` jobs: those whose lease expired on their last attempt are made dead,
  /// then queued jobs (or running ones whose lease is over) are taken, given a new token and
  /// lease, and written to the ledger, all in one statement.
  struct ClaimStatement: PostgresPreparedStatement {
    typealias Row = (Int64, UUID, String, Int, UUID, Date, String)

    static let sql = """
      WITH exhausted AS (
        UPDATE darkroom_jobs SET state = 'dead', lease_expires_at = NULL, last_error_code = 'timedOut',
          last_error = 'its lease expired on attempt ' || attempts || ': the worker stopped while it ran', updated_at = now()
        WHERE id IN (
          SELECT id FROM darkroom_jobs WHERE state = 'running' AND \(PostgresJobQueue.leaseOver) AND attempts >= $1
          FOR UPDATE SKIP LOCKED)
        RETURNING id, attempts, worker, lease_token
      ), buried AS (
        INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token, detail)
        SELECT id, 'dead', coalesce(worker, ''), attempts, lease_token, 'lease expired' FROM exhausted
      ), picked AS (
        SELECT id FROM darkroom_jobs
        WHERE (state = 'queued' OR (state = 'running' AND \(PostgresJobQueue.leaseOver) AND attempts < $1))
          AND ($2::uuid IS NULL OR batch_id = $2::uuid)
        ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $3
      ), claimed AS (
        -- Attempts as stored are not trusted: counted from 0 to 1,000,000, never overflowing.
        UPDATE darkroom_jobs j SET state = 'running', attempts = least(greatest(j.attempts, 0), 1000000) + 1,
          lease_token = gen_random_uuid(),
          lease_expires_at = clock_timestamp() + make_interval(secs => $4), worker = $5, updated_at = now()
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.batch_id, j.source, j.attempts, j.lease_token, j.lease_expires_at, j.name
      ), logged AS (
        INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token)
        SELECT id, 'claimed', $5, attempts, lease_token FROM claimed
      )
      SELECT id, batch_id, source, attempts, lease_token, lease_expires_at, name FROM claimed ORDER BY id
      """
    static let bindingDataTypes: [PostgresDataType] = [.int4, .uuid, .int8, .float8, .text]

    var maxAttempts: Int
    var batch: UUID?
    var limit: Int
    var seconds: Double
    var worker: String

    func makeBindings() throws -> PostgresBindings {
      var bindings = PostgresBindings(capacity: 5)
      bindings.append(Int32(clamping: maxAttempts))
      bindings.append(batch)
      bindings.append(Int64(limit))
      bindings.append(seconds)
      bindings.append(worker)
      return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
  }

  /// Marks a job done under its lease, stores its results and writes its ledger row, in one
  /// statement; the job's id when the lease was still the job's, no row otherwise.
  struct CompleteStatement: PostgresPreparedStatement {
    typealias Row = Int64

    static let sql = """
      WITH done AS (
        UPDATE darkroom_jobs SET state = 'done', lease_expires_at = NULL, updated_at = now(), result_count = $1
        WHERE id = $2 AND lease_token = $3 AND state = 'running' RETURNING id
      ), stored AS (
        INSERT INTO darkroom_results (job_id, name, bytes, sha256, size, keep_existing)
        SELECT done.id, r.name, CASE WHEN r.shared THEN NULL ELSE r.bytes END, r.sha256, r.size, r.keep
        FROM done, unnest($4::text[], $5::bytea[], $6::boolean[], $7::text[], $8::bigint[], $9::boolean[])
          AS r (name, bytes, shared, sha256, size, keep)
      ), logged AS (
        INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token)
        SELECT id, 'done', $10, $11, $3 FROM done
      )
      SELECT id FROM done
      """
    static let bindingDataTypes: [PostgresDataType] = [
      .int4, .int8, .uuid, .textArray, .byteaArray, .boolArray, .textArray, .int8Array, .boolArray, .text, .int4,
    ]

    var resultCount: Int
    var job: Int64
    var token: UUID
    var names: [String]
    var bytes: [ByteBuffer]
    var shared: [Bool]
    var digests: [String]
    var sizes: [Int64]
    var keep: [Bool]
    var worker: String
    var attempt: Int

    func makeBindings() throws -> PostgresBindings {
      var bindings = PostgresBindings(capacity: 11)
      bindings.append(Int32(clamping: resultCount))
      bindings.append(job)
      bindings.append(token)
      bindings.append(names)
      bindings.append(bytes)
      bindings.append(shared)
      bindings.append(digests)
      bindings.append(sizes)
      bindings.append(keep)
      bindings.append(worker)
      bindings.append(Int32(clamping: attempt))
      return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
  }
}
