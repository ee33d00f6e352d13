import Foundation
import PostgresNIO

/// The statements a worker runs for every job, prepared once per connection (postgres-nio names
/// them by their type and prepares them on first use): PostgreSQL then neither parses nor plans
/// them again for each job, which was half of the database's own work per job.
extension PostgresJobQueue {
  /// Runs a prepared statement on a pooled connection and reads all its rows. A connection on
  /// which one failed is closed, and the pool opens another: postgres-nio keeps a statement
  /// whose preparation failed (a statement timeout behind a lock, a table not made yet) as
  /// failed on its connection for good, and PostgreSQL refuses one whose result type changed
  /// under it ("cached plan must not change result type") until it is prepared again, which a
  /// new connection does.
  func execute<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row]
  where Statement.Row: Sendable {
    let logger = logger
    return try await client.withConnection { connection in
      do {
        var rows: [Statement.Row] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        return rows
      } catch {
        if Self.leavesStatementsUsable(error) { throw error }
        try? await connection.close()
        throw error
      }
    }
  }

  /// The claim's steps (common table expressions, the last named `claimed`): jobs whose lease
  /// expired on their last attempt are made dead, then queued jobs (or running ones whose lease
  /// is over) are taken, given a new token and lease, and written to the ledger. Its values are
  /// the parameters named: the most attempts, the batch (or NULL), how many, the lease in
  /// seconds and the worker, and a job never to take (or nil).
  static func claimSteps(
    attempts: String, batch: String, limit: String, seconds: String, worker: String, excluding job: String?
  ) -> String {
    """
    exhausted AS (
      UPDATE darkroom_jobs SET state = 'dead', lease_expires_at = NULL, last_error_code = 'timedOut',
        last_error = 'its lease expired on attempt ' || attempts || ': the worker stopped while it ran', updated_at = now()
      WHERE id IN (
        SELECT id FROM darkroom_jobs WHERE state = 'running' AND \(PostgresJobQueue.leaseOver) AND attempts >= \(attempts)
        FOR UPDATE SKIP LOCKED)
      RETURNING id, attempts, worker, lease_token
    ), buried AS (
      INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token, detail)
      SELECT id, 'dead', coalesce(worker, ''), attempts, lease_token, 'lease expired' FROM exhausted
    ), picked AS (
      SELECT id FROM darkroom_jobs
      WHERE (state = 'queued' OR (state = 'running' AND \(PostgresJobQueue.leaseOver) AND attempts < \(attempts)))
        AND (\(batch)::uuid IS NULL OR batch_id = \(batch)::uuid)\(job.map { " AND id <> \($0)" } ?? "")
      ORDER BY id FOR UPDATE SKIP LOCKED LIMIT \(limit)
    ), claimed AS (
      -- Attempts as stored are not trusted: counted from 0 to 1,000,000, never overflowing.
      UPDATE darkroom_jobs j SET state = 'running', attempts = least(greatest(j.attempts, 0), 1000000) + 1,
        lease_token = gen_random_uuid(),
        lease_expires_at = clock_timestamp() + make_interval(secs => \(seconds)), worker = \(worker), updated_at = now()
      FROM picked WHERE j.id = picked.id
      RETURNING j.id, j.batch_id, j.source, j.attempts, j.lease_token, j.lease_expires_at, j.name
    ), logged AS (
      INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token)
      SELECT id, 'claimed', \(worker), attempts, lease_token FROM claimed
    )
    """
  }

  /// Whether the statements prepared on a connection still work after `error`: a row refused by
  /// the tables' constraints or a value out of range is the data's fault, raised while a
  /// statement ran, and keeps the connection; anything else (a failed preparation, a result
  /// type that changed, a lost connection) closes it.
  static func leavesStatementsUsable(_ error: any Error) -> Bool {
    guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
    return state.hasPrefix("22") || state.hasPrefix("23")
  }

  /// The claimed jobs' columns (from `claimed`, the claim's last step), each with its batch's
  /// pipeline and pipeline name when its batch is not among `known` (a `uuid[]` parameter: the
  /// batches this process has read), NULL otherwise: the claim brings all a worker needs, and
  /// nothing is asked after it commits (a question failing then would leave its jobs claimed for
  /// nobody). A pipeline grown in the table past what enqueue takes is read as none ('').
  static func claimedColumns(known: String) -> (columns: String, from: String) {
    (
      """
      c.id, c.batch_id, c.source, c.attempts, c.lease_token, c.lease_expires_at, c.name,
        CASE WHEN b.id IS NULL THEN NULL WHEN octet_length(b.pipeline) <= \(PostgresJobQueue.maxPipelineBytes)
          THEN b.pipeline ELSE '' END,
        left(b.pipeline_name, 255)
      """,
      "claimed c LEFT JOIN darkroom_batches b ON b.id = c.batch_id AND NOT (c.batch_id = ANY(\(known)::uuid[]))"
    )
  }

  /// Claims up to `limit` jobs (``claimSteps(attempts:batch:limit:seconds:worker:excluding:)``)
  /// in one statement, with the pipelines of the batches not `known`.
  struct ClaimStatement: PostgresPreparedStatement {
    typealias Row = (Int64, UUID, String, Int, UUID, Date, String, String?, String?)

    static let sql =
      "WITH "
      + PostgresJobQueue.claimSteps(attempts: "$1", batch: "$2", limit: "$3", seconds: "$4", worker: "$6", excluding: nil)
      + "\nSELECT \(PostgresJobQueue.claimedColumns(known: "$5").columns)"
      + "\nFROM \(PostgresJobQueue.claimedColumns(known: "$5").from) ORDER BY c.id"
    static let bindingDataTypes: [PostgresDataType] = [.int4, .uuid, .int8, .float8, .uuidArray, .text]

    var maxAttempts: Int
    var batch: UUID?
    var limit: Int
    var seconds: Double
    /// The batches whose pipelines this process has: theirs are not sent again.
    var known: [UUID]
    var worker: String

    func makeBindings() throws -> PostgresBindings {
      var bindings = PostgresBindings(capacity: 6)
      appendTerms(to: &bindings)
      bindings.append(worker)
      return bindings
    }

    /// The claim's terms, in their parameters' order: the most attempts, the batch, how many,
    /// the lease in seconds and the known batches.
    func appendTerms(to bindings: inout PostgresBindings) {
      bindings.append(Int32(clamping: maxAttempts))
      bindings.append(batch)
      bindings.append(Int64(limit))
      bindings.append(seconds)
      bindings.append(known)
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
  }

  /// The completion's steps (the first named `done`): the job marked done under its lease, its
  /// results and its ledger row, or nothing at all. Parameters $1 to $11 (``CompleteStatement``'s).
  static let completeSteps = """
    done AS (
      UPDATE darkroom_jobs SET state = 'done', lease_expires_at = NULL, updated_at = now(), result_count = $1
      WHERE id = $2 AND lease_token = $3 AND state = 'running' RETURNING id
    ), stored AS (
      INSERT INTO darkroom_results (job_id, name, bytes, sha256, size, keep_existing)
      SELECT done.id, r.name, CASE WHEN r.shared THEN NULL ELSE r.bytes END, r.sha256, r.size, r.keep
      FROM done, unnest($4::text[], $5::bytea[], $6::boolean[], $7::text[], $8::bigint[], $9::boolean[])
        AS r (name, bytes, shared, sha256, size, keep)
    ), completed AS (
      INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token)
      SELECT id, 'done', $10, $11, $3 FROM done
    )
    """

  /// Marks a job done under its lease, stores its results and writes its ledger row, in one
  /// statement; the job's id when the lease was still the job's, no row otherwise.
  struct CompleteStatement: PostgresPreparedStatement {
    typealias Row = Int64

    static let sql = "WITH " + PostgresJobQueue.completeSteps + "\nSELECT id FROM done"
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
      var bindings = PostgresBindings(capacity: 15)
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

  /// A completion and the next claim in one statement (one round trip and one commit per job
  /// for a worker that keeps busy): the completed job's id in a row marked true when the lease
  /// was still the job's, and a row marked false per job claimed. The claim never takes the job
  /// being completed (one statement cannot change a row twice).
  struct CompleteAndClaimStatement: PostgresPreparedStatement {
    typealias Row = (Bool, Int64, UUID?, String?, Int?, UUID?, Date?, String?, String?, String?)

    static let sql =
      "WITH " + PostgresJobQueue.completeSteps + ", "
      + PostgresJobQueue.claimSteps(attempts: "$12", batch: "$13", limit: "$14", seconds: "$15", worker: "$10", excluding: "$2")
        + """

        SELECT true, id, NULL::uuid, NULL::text, NULL::integer, NULL::uuid, NULL::timestamptz, NULL::text, NULL::text, NULL::text
        FROM done
        UNION ALL
        SELECT false, \(PostgresJobQueue.claimedColumns(known: "$16").columns)
        FROM \(PostgresJobQueue.claimedColumns(known: "$16").from)
        """
    static let bindingDataTypes: [PostgresDataType] =
      CompleteStatement.bindingDataTypes + [.int4, .uuid, .int8, .float8, .uuidArray]

    var complete: CompleteStatement
    var claim: ClaimStatement

    func makeBindings() throws -> PostgresBindings {
      var bindings = try complete.makeBindings()
      claim.appendTerms(to: &bindings)
      return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
  }
}
