import DarkroomCore
import Logging
import PostgresNIO

/// The queue's tables, created and migrated by Darkroom itself: no SQL for the user to run.
///
/// Each migration is a version number and its statements. ``migrate(_:logger:)`` applies the
/// missing ones in one transaction, under a transaction-level advisory lock, so that processes
/// starting together wait for each other instead of racing; the versions applied are recorded
/// in `darkroom_schema`. A database migrated by a newer Darkroom (a version this one does not
/// know) is refused rather than written with an older idea of its tables.
enum PostgresSchema {
  /// The lock every migration takes (`pg_advisory_xact_lock`): "darkroom" in ASCII.
  static let lockKey: Int64 = 0x6461_726B_726F_6F6D

  static let migrations: [(version: Int, statements: [PostgresQuery])] = [
    (
      1,
      [
        """
        CREATE TABLE darkroom_batches (
          id uuid PRIMARY KEY,
          name text NOT NULL UNIQUE,
          pipeline text NOT NULL,
          pipeline_sha256 text NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE darkroom_jobs (
          id bigserial PRIMARY KEY,
          batch_id uuid NOT NULL REFERENCES darkroom_batches (id) ON DELETE CASCADE,
          source text NOT NULL,
          state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'dead')),
          attempts integer NOT NULL DEFAULT 0,
          lease_token uuid,
          lease_expires_at timestamptz,
          worker text,
          last_error_code text,
          last_error text,
          updated_at timestamptz NOT NULL DEFAULT now(),
          source_key text NOT NULL,
          UNIQUE (batch_id, source_key)
        )
        """,
        "CREATE INDEX darkroom_jobs_open ON darkroom_jobs (id) WHERE state IN ('queued', 'running')",
        """
        CREATE TABLE darkroom_results (
          job_id bigint PRIMARY KEY REFERENCES darkroom_jobs (id) ON DELETE CASCADE,
          name text NOT NULL,
          bytes bytea NOT NULL,
          sha256 text NOT NULL,
          size bigint NOT NULL
        )
        """,
        """
        CREATE TABLE darkroom_ledger (
          id bigserial PRIMARY KEY,
          job_id bigint NOT NULL REFERENCES darkroom_jobs (id) ON DELETE CASCADE,
          event text NOT NULL,
          worker text NOT NULL,
          attempt integer NOT NULL,
          lease_token uuid,
          at timestamptz NOT NULL DEFAULT now(),
          detail text
        )
        """,
        "CREATE INDEX darkroom_ledger_job ON darkroom_ledger (job_id)",
      ]
    ),
    (
      // Output names chosen when a batch is enqueued, several results per job (one per
      // variant), and results kept in a shared folder (bytes NULL) when too large for the table.
      2,
      [
        "ALTER TABLE darkroom_batches ADD COLUMN pipeline_name text NOT NULL DEFAULT 'pipeline'",
        "ALTER TABLE darkroom_jobs ADD COLUMN name text NOT NULL DEFAULT ''",
        "ALTER TABLE darkroom_results DROP CONSTRAINT darkroom_results_pkey",
        "ALTER TABLE darkroom_results ALTER COLUMN bytes DROP NOT NULL",
        "ALTER TABLE darkroom_results ADD PRIMARY KEY (job_id, name)",
        "CREATE INDEX darkroom_jobs_batch ON darkroom_jobs (batch_id, id)",
      ]
    ),
    (
      // The servers' shared result cache (`darkroom serve --shared-cache`).
      3,
      [
        """
        CREATE TABLE darkroom_cache (
          key_sha256 text PRIMARY KEY,
          format text NOT NULL,
          width integer NOT NULL,
          height integer NOT NULL,
          bytes bytea NOT NULL,
          sha256 text NOT NULL,
          size bigint NOT NULL,
          expires_at timestamptz NOT NULL,
          stored_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        "CREATE INDEX darkroom_cache_expiry ON darkroom_cache (expires_at)",
        // Outputs that must not replace a file, and how many results a done job stored (a row
        // missing later is told apart from a job that made none).
        "ALTER TABLE darkroom_results ADD COLUMN keep_existing boolean NOT NULL DEFAULT false",
        "ALTER TABLE darkroom_jobs ADD COLUMN result_count integer",
        "CREATE INDEX darkroom_jobs_name ON darkroom_jobs (batch_id, lower(name))",
      ]
    ),
    (
      // Every claim looks for running jobs whose lease is over: without an index of the running
      // jobs alone, that was a scan of every job ever queued (done ones included) per claim.
      4,
      [
        "CREATE INDEX darkroom_jobs_running ON darkroom_jobs (lease_expires_at) WHERE state = 'running'",
        // The servers' render claims: a row per key being rendered, with the claimant's token and
        // an expiry (a claim whose instance died lapses by itself; none holds a connection).
        """
        CREATE TABLE darkroom_cache_claims (
          key_sha256 text PRIMARY KEY,
          token uuid NOT NULL,
          expires_at timestamptz NOT NULL
        )
        """,
      ]
    ),
    (
      // Images are stored as they are: PostgreSQL tried to compress every result and every
      // cached image (pglz), and compressed images never shrink.
      5,
      [
        "ALTER TABLE darkroom_results ALTER COLUMN bytes SET STORAGE EXTERNAL",
        "ALTER TABLE darkroom_cache ALTER COLUMN bytes SET STORAGE EXTERNAL",
      ]
    ),
  ]

  /// The version the database is at (0 with none applied); fails when it has no schema table.
  static func version(_ client: PostgresClient, logger: Logger) async throws -> Int {
    var found = 0
    for try await version in try await client.query("SELECT coalesce(max(version), 0) FROM darkroom_schema", logger: logger)
      .decode(Int.self)
    {
      found = version
    }
    return found
  }

  /// The newest version this Darkroom knows.
  static var currentVersion: Int { migrations.last?.version ?? 0 }

  /// Brings the database to ``currentVersion`` (or only to `target`); returns the version it was at.
  @discardableResult
  static func migrate(_ client: PostgresClient, logger: Logger, to target: Int = currentVersion) async throws -> Int {
    // At this version already (every start but the first): one read, without a transaction or
    // the lock. A table not made yet fails the read, and the migration below makes it.
    if target == currentVersion, (try? await version(client, logger: logger)) == currentVersion { return currentVersion }
    return try await client.withTransaction(logger: logger) { connection in
      try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS darkroom_schema (
          version integer PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now()
        )
        """, logger: logger)
      var found = 0
      for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM darkroom_schema", logger: logger)
        .decode(Int.self)
      {
        found = version
      }
      guard found <= currentVersion else {
        throw PipelineError(
          .queueUnavailable,
          "the queue's tables are at version \(found), newer than this darkroom's \(currentVersion): upgrade darkroom")
      }
      for migration in migrations where migration.version > found && migration.version <= target {
        for statement in migration.statements { try await connection.query(statement, logger: logger) }
        try await connection.query("INSERT INTO darkroom_schema (version) VALUES (\(migration.version))", logger: logger)
        logger.info("queue schema migrated", metadata: ["version": "\(migration.version)"])
      }
      return found
    }
  }
}
