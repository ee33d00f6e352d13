import DarkroomCore
import Foundation
import Logging
import PostgresNIO

/// A `JobQueue` (from `DarkroomCore`) on PostgreSQL: jobs are claimed with `FOR UPDATE SKIP LOCKED`,
/// under leases fenced by a token, and a result commits in the transaction that marks its job
/// done. Every claim, completion, retry and refusal is written to a ledger (`darkroom_ledger`).
///
/// The queue uses a running `PostgresClient` (postgres-nio's connection pool): run the client
/// beside it, or use ``withQueue(at:logger:preparing:_:)``, which does both. The tables are created on
/// first use (``prepare()``), or by `darkroom queue init`.
///
/// ```swift
/// try await PostgresJobQueue.withQueue(at: PostgresLocation("postgres://darkroom@db/images")) { queue in
///   let batch = try await queue.enqueue(batch: "thumbs", pipeline: json, sources: ["a.jpg"])
///   print(try await queue.status(of: batch.id))   // queued 1, running 0, done 0, dead 0
/// }
/// ```
public final class PostgresJobQueue: JobQueue {
  public let client: PostgresClient
  let logger: Logger
  /// Where results go: the table up to a size, a shared folder beyond it.
  public let storage: ResultStorage
  /// Each batch's pipeline and its name, read once: a batch's pipeline never changes.
  let pipelines = Protected<[UUID: (text: String, name: String)]>([:])

  /// Sources of at most this many bytes (a path or a URL) are queued.
  public static let maxSourceBytes = 8_192
  /// Batch names of at most this many bytes.
  public static let maxNameBytes = 200
  /// Pipeline names (a pipeline file's name without its extension) of at most this many bytes.
  public static let maxPipelineNameBytes = 255
  /// Pipelines of at most this many bytes of JSON.
  public static let maxPipelineBytes = 1 << 20
  /// When a running job's lease is over: expired, missing, or further away than any lease can
  /// be (a lease is at most a day: a later expiry is not one this queue wrote).
  static let leaseOver =
    "(lease_expires_at IS NULL OR lease_expires_at < now() OR lease_expires_at > now() + interval '1 day 1 hour')"

  /// How many batches' pipelines a queue keeps after reading them.
  static let cachedPipelines = 64
  /// How long one call may wait for the database (a connection, a query, a commit) before it
  /// fails with `queueUnavailable`; postgres-nio's own pool would wait about a minute.
  public static let operationTimeout: Duration = .seconds(15)

  public init(client: PostgresClient, logger: Logger = Logger(label: "darkroom.queue"), storage: ResultStorage = ResultStorage())
  {
    self.client = client
    self.logger = logger
    self.storage = storage
  }

  /// Connects once to `location` (an unreachable queue fails at once, with its cause), runs a
  /// client for it, prepares the tables, and calls `body` with the queue; the client stops when
  /// `body` returns.
  /// With `preparing` false, the tables are left as they are (for ``migrate()``).
  public static func withQueue<Result: Sendable>(
    at location: PostgresLocation, logger: Logger = Logger(label: "darkroom.queue"), preparing: Bool = true,
    storage: ResultStorage = ResultStorage(), _ body: @Sendable (PostgresJobQueue) async throws -> Result
  ) async throws -> Result {
    try await location.checkConnection(logger: logger)
    // The server ends a statement a second before the queue gives up on it.
    let client = PostgresClient(
      configuration: location.configuration(statementTimeout: operationTimeout - .seconds(1)), backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      let queue = PostgresJobQueue(client: client, logger: logger, storage: storage)
      if preparing { try await queue.prepare() }
      return try await body(queue)
    }
  }

  public func prepare() async throws(PipelineError) { _ = try await migrate() }

  /// Creates or migrates the tables (what ``prepare()`` does) and says from which version to
  /// which (`from` 0: they were made now; `from == to`: nothing to do).
  ///
  /// ```swift
  /// let (from, to) = try await queue.migrate()   // (0, 1) the first time, (1, 1) after
  /// ```
  @discardableResult
  public func migrate() async throws(PipelineError) -> (from: Int, to: Int) {
    let found = try await database("prepare its tables") { try await PostgresSchema.migrate(self.client, logger: self.logger) }
    return (found, PostgresSchema.currentVersion)
  }

  public func enqueue(batch: String, pipeline: String, pipelineName: String, sources jobs: [JobSource])
    async throws(PipelineError) -> EnqueuedBatch
  {
    guard !batch.isEmpty, batch.utf8.count <= Self.maxNameBytes, !batch.contains("\0") else {
      throw PipelineError(.invalidInput, "a batch name is 1 to \(Self.maxNameBytes) bytes, without NUL")
    }
    let sources = jobs.map(\.source)
    if let bad = sources.first(where: { $0.isEmpty || $0.utf8.count > Self.maxSourceBytes || $0.contains("\0") }) {
      throw PipelineError(
        .invalidInput, "a queued source is 1 to \(Self.maxSourceBytes) bytes, without NUL: \(bad.prefix(80))")
    }
    if let bad = jobs.first(where: { $0.name.utf8.count > Self.maxNameBytes * 2 || $0.name.contains("\0") }) {
      throw PipelineError(
        .invalidInput, "an output name is at most \(Self.maxNameBytes * 2) bytes, without NUL: \(bad.name.prefix(80))")
    }
    guard !pipelineName.isEmpty, pipelineName.utf8.count <= Self.maxPipelineNameBytes, !pipelineName.contains("\0") else {
      throw PipelineError(.invalidInput, "a pipeline name is 1 to \(Self.maxPipelineNameBytes) bytes, without NUL")
    }
    guard !pipeline.contains("\0"), pipeline.utf8.count <= Self.maxPipelineBytes else {
      throw PipelineError(.invalidInput, "a queued pipeline is at most \(Self.maxPipelineBytes) bytes, without NUL")
    }
    let digest = RequestDigest.hex(pipeline)
    let logger = logger
    return try await database("enqueue the batch") {
      try await self.client.withTransaction(logger: logger) { connection in
        try await connection.query(
          """
          INSERT INTO darkroom_batches (id, name, pipeline, pipeline_sha256, pipeline_name)
          VALUES (gen_random_uuid(), \(batch), \(pipeline), \(digest), \(pipelineName)) ON CONFLICT (name) DO NOTHING
          """, logger: logger)
        var found: (UUID, String, String)?
        for try await row in try await connection.query(
          "SELECT id, pipeline_sha256, pipeline_name FROM darkroom_batches WHERE name = \(batch)", logger: logger
        ).decode((UUID, String, String).self) {
          found = row
        }
        guard let (id, existing, existingName) = found else {
          throw PipelineError(.queueUnavailable, "the batch \(batch) was not stored")
        }
        guard existing == digest, existingName == pipelineName else {
          throw PipelineError(
            .invalidInput, "the batch \(batch) was enqueued with another pipeline; give this one another --batch name")
        }
        // Enqueues into one batch wait for each other here, so that the names below stay unique.
        try await connection.query("SELECT id FROM darkroom_batches WHERE id = \(id) FOR UPDATE", logger: logger)
        var added = 0
        // Sources in slices, so that one statement's parameters stay bounded.
        for start in stride(from: 0, to: sources.count, by: 1_000) {
          let slice = Array(sources[start..<min(start + 1_000, sources.count)])
          // Unique by the SHA-256 of the source: an index on the text itself would limit it to
          // the index's row size (2,704 bytes), far under a long URL.
          let keys = slice.map(Self.sourceKey)
          let names = try await Self.uniqueNames(
            jobs[start..<min(start + 1_000, jobs.count)].map(\.name), sources: slice, keys: keys, batch: id, on: connection,
            logger: logger)
          for try await _ in try await connection.query(
            """
            INSERT INTO darkroom_jobs (batch_id, source, source_key, name)
            SELECT \(id), s, k, n FROM unnest(\(slice)::text[], \(keys)::text[], \(names)::text[]) AS t (s, k, n)
            ON CONFLICT (batch_id, source_key) DO NOTHING RETURNING id
            """, logger: logger
          ) {
            added += 1
          }
        }
        return EnqueuedBatch(id: id, added: added)
      }
    }
  }

  public func claim(worker: String, limit: Int, lease: Duration, maxAttempts: Int, batch only: UUID?)
    async throws(PipelineError) -> [JobLease]
  {
    let seconds = try Self.leaseSeconds(lease)
    guard (1...1_000).contains(limit) else { throw PipelineError(.invalidInput, "a claim takes 1 to 1000 jobs, not \(limit)") }
    try Self.checkAttempts(maxAttempts)
    let worker = worker.storable(maxBytes: 200)
    let known = knownPipelines
    return try await database("claim jobs") {
      let claimed = try await self.execute(
        ClaimStatement(
          maxAttempts: maxAttempts, batch: only, limit: limit, seconds: seconds, known: Array(known.keys), worker: worker))
      return self.leases(claimed, known: known, worker: worker)
    }
  }

  public func heartbeat(_ lease: JobLease, extendingBy duration: Duration) async throws(PipelineError) -> Bool {
    let seconds = try Self.leaseSeconds(duration)
    let logger = logger
    return try await database("renew a lease") {
      var renewed = false
      for try await _ in try await self.client.query(
        """
        UPDATE darkroom_jobs SET lease_expires_at = clock_timestamp() + make_interval(secs => \(seconds))
        WHERE id = \(lease.job) AND lease_token = \(lease.token) AND state = 'running' RETURNING id
        """, logger: logger)
      {
        renewed = true
      }
      return renewed
    }
  }

  public func complete(_ lease: JobLease, with results: [JobResult]) async throws(PipelineError) -> Bool {
    let statement = try await completion(of: lease, with: results)
    return try await database("store a result") {
      // The usual case in one statement (one round trip): the job marked done under this lease,
      // its results and its ledger row, or nothing at all.
      if try await !self.execute(statement).isEmpty { return true }
      return try await self.refused(lease)
    }
  }

  public func release(_ lease: JobLease) async throws(PipelineError) -> Bool {
    let logger = logger
    let worker = lease.worker.storable(maxBytes: 200)
    return try await database("give a job back") {
      try await self.client.withTransaction(logger: logger) { connection in
        var released = false
        for try await _ in try await connection.query(
          """
          UPDATE darkroom_jobs SET state = 'queued', attempts = greatest(attempts - 1, 0), lease_token = NULL,
            lease_expires_at = NULL, updated_at = now()
          WHERE id = \(lease.job) AND lease_token = \(lease.token) AND state = 'running' RETURNING id
          """, logger: logger)
        {
          released = true
        }
        try await Self.record(
          released ? "released" : "fenced", lease, worker: worker, detail: released ? nil : "release",
          on: connection, logger: logger)
        return released
      }
    }
  }

  public func fail(_ lease: JobLease, with error: PipelineError, maxAttempts: Int) async throws(PipelineError) -> JobState? {
    try Self.checkAttempts(maxAttempts)
    let logger = logger
    let worker = lease.worker.storable(maxBytes: 200)
    let message = error.message.storable(maxBytes: 4_096)
    let code = error.code.rawValue.storable(maxBytes: 200)
    return try await database("record a failure") {
      try await self.client.withTransaction(logger: logger) { connection -> JobState? in
        var attempts: Int?
        for try await count in try await connection.query(
          """
          SELECT attempts FROM darkroom_jobs
          WHERE id = \(lease.job) AND lease_token = \(lease.token) AND state = 'running' FOR UPDATE
          """, logger: logger
        ).decode(Int.self) {
          attempts = count
        }
        guard let attempts else {
          try await Self.record("fenced", lease, worker: worker, detail: "fail", on: connection, logger: logger)
          return nil
        }
        let state: JobState = error.code.isPermanent || attempts >= maxAttempts ? .dead : .queued
        try await connection.query(
          """
          UPDATE darkroom_jobs SET state = \(state.rawValue), lease_token = NULL, lease_expires_at = NULL,
            last_error_code = \(code), last_error = \(message), updated_at = now()
          WHERE id = \(lease.job)
          """, logger: logger)
        try await Self.record(
          state == .dead ? "dead" : "retry", lease, worker: worker, detail: code + ": " + message, on: connection, logger: logger)
        return state
      }
    }
  }

  public func status(of batch: UUID) async throws(PipelineError) -> BatchStatus {
    let logger = logger
    return try await database("read the batch's status") {
      var known = false
      for try await _ in try await self.client.query("SELECT 1 FROM darkroom_batches WHERE id = \(batch)", logger: logger) {
        known = true
      }
      guard known else { throw PipelineError(.notFound, "the queue holds no batch \(batch)") }
      var counts: [JobState: Int] = [:]
      for try await (state, count) in try await self.client.query(
        "SELECT state, count(*)::bigint FROM darkroom_jobs WHERE batch_id = \(batch) GROUP BY state", logger: logger
      ).decode((String, Int64).self) {
        if let state = JobState(rawValue: state) { counts[state] = Int(count) }
      }
      return BatchStatus(counts: counts)
    }
  }

  /// A lease's length in seconds, checked: 1 second to 1 day.
  static func leaseSeconds(_ duration: Duration) throws(PipelineError) -> Double {
    let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    guard seconds.isFinite, (1...86_400).contains(seconds) else {
      throw PipelineError(.invalidInput, "a lease is 1 second to 1 day long, not \(seconds) s")
    }
    return seconds
  }

  /// Runs `body` within ``operationTimeout``, turning what the database throws into a `PipelineError`.
  func database<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws(PipelineError) -> T {
    try await Self.bounded(what, by: Self.operationTimeout, of: "the queue's database", body)
  }

  /// Runs `body` within `timeout`, turning what the database throws into a `PipelineError`
  /// (`queueUnavailable` naming `database` when it did not answer in time).
  static func bounded<T: Sendable>(
    _ what: String, by timeout: Duration, of database: String, _ body: @escaping @Sendable () async throws -> T
  ) async throws(PipelineError) -> T {
    // Not a task group: a group waits for its children, and a query already sent does not stop
    // when cancelled (a table locked by another session held a call for as long as the lock).
    let timedOut = PipelineError(.queueUnavailable, "\(database) did not answer within \(timeout) when asked to \(what)")
    switch await BoundedCall.run(timeout: timeout, timedOut: timedOut, body) {
    case .success(let value): return value
    case .failure(let error): throw Self.pipelineError(error, doing: what)
    }
  }

  /// Writes one event of `lease`'s job in the ledger (nothing for a job that does not exist).
  static func record(
    _ event: String, _ lease: JobLease, worker: String, detail: String?, on connection: PostgresConnection, logger: Logger
  ) async throws {
    try await connection.query(
      """
      INSERT INTO darkroom_ledger (job_id, event, worker, attempt, lease_token, detail)
      SELECT \(lease.job), \(event), \(worker), \(lease.attempt), \(lease.token), \(detail)
      WHERE EXISTS (SELECT 1 FROM darkroom_jobs WHERE id = \(lease.job))
      """, logger: logger)
  }

  /// Output names for new sources (`{name}`), unique in the batch without regard to case, so
  /// that two jobs never make one file: an empty name is the source's own base name, and a name
  /// another source of the batch has (enqueued before, or earlier in this call) gets the first 8
  /// hex digits of the source's SHA-256 added (all 64 should that still meet one). Sources
  /// already in the batch keep theirs (their rows are not touched).
  static func uniqueNames(
    _ names: [String], sources: [String], keys: [String], batch: UUID, on connection: PostgresConnection, logger: Logger
  ) async throws -> [String] {
    // A name made from a source is cut to what a file name can hold (a URL's last part can be long).
    var names = zip(names, sources).map { name, source in
      name.isEmpty ? ImageSource(source).name.storable(maxBytes: maxPipelineNameBytes) : name
    }
    var known = Set<String>()
    for try await key in try await connection.query(
      "SELECT source_key FROM darkroom_jobs WHERE batch_id = \(batch) AND source_key = ANY(\(keys))", logger: logger
    ).decode(String.self) {
      known.insert(key)
    }
    for digits in [8, 64] {
      let lowered = names.map { $0.lowercased() }
      var taken = Set<String>()
      for try await name in try await connection.query(
        "SELECT lower(name) FROM darkroom_jobs WHERE batch_id = \(batch) AND lower(name) = ANY(\(lowered))", logger: logger
      ).decode(String.self) {
        taken.insert(name)
      }
      var clashes = 0
      for index in names.indices where !known.contains(keys[index]) {
        let name = lowered[index]
        if taken.contains(name) {
          names[index] = names[index].storable(maxBytes: maxNameBytes * 2 - 65) + "-" + keys[index].prefix(digits)
          clashes += 1
        }
        taken.insert(names[index].lowercased())
      }
      if clashes == 0 { break }
    }
    return names
  }

  /// The key a source is unique by in its batch: the hex SHA-256 of its UTF-8.
  static func sourceKey(_ source: String) -> String {
    RequestDigest.hex(source)
  }

  static func checkAttempts(_ maxAttempts: Int) throws(PipelineError) {
    guard (1...1_000).contains(maxAttempts) else {
      throw PipelineError(.invalidInput, "maxAttempts is 1 to 1000, not \(maxAttempts)")
    }
  }

  static func pipelineError(_ error: any Error, doing what: String) -> PipelineError {
    if let error = error as? PipelineError { return error }
    if let error = error as? PostgresTransactionError {
      if let inner = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError {
        return pipelineError(inner, doing: what)
      }
    }
    if error is CancellationError {
      return PipelineError(.cancelled, "cancelled while the queue's database was asked to \(what)")
    }
    if leavesStatementsUsable(error) {
      // The tables refuse the data (a constraint, a value out of range): asking again cannot
      // help, and a job whose result is refused fails rather than being retried for ever.
      return PipelineError(.invalidInput, "the queue's tables refuse to \(what): \(detail(of: error))")
    }
    return PipelineError(.queueUnavailable, "the queue's database could not \(what): \(detail(of: error))")
  }

  /// What went wrong, in the server's words when it said why.
  static func detail(of error: any Error) -> String {
    guard let error = error as? PSQLError else { return "\(error)" }
    return error.serverInfo?[.message] ?? error.underlying.map { "\($0)" } ?? "\(error.code)"
  }
}
