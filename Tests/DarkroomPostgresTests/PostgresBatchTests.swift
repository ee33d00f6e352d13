import DarkroomCore
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import DarkroomPostgres

/// Batches read back: migrations that keep data, several results per job, large results in a
/// shared folder, listing, retrying and giving jobs back.
@Suite("the PostgreSQL job queue's batches and results", .postgresServer)
struct PostgresBatchTests {
  private let pipeline = #"{"version": 1, "name": "t", "stages": []}"#

  private func withQueue<T: Sendable>(
    storage: ResultStorage = ResultStorage(), _ body: @Sendable (PostgresJobQueue, PostgresLocation) async throws -> T
  ) async throws -> T {
    let location = try await PostgresTestServer.suite.newDatabase()
    return try await PostgresJobQueue.withQueue(at: location, storage: storage) { try await body($0, location) }
  }

  private func claimOne(_ queue: PostgresJobQueue, batch: UUID? = nil) async throws -> JobLease {
    try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3, batch: batch).first)
  }

  @Test("a database made by version 1 is migrated with its jobs and results kept")
  func migrationKeepsData() async throws {
    let location = try await PostgresTestServer.suite.newDatabase()
    let logger = Logger(label: "test")
    try await PostgresJobQueue.withQueue(at: location, preparing: false) { queue in
      try await PostgresSchema.migrate(queue.client, logger: logger, to: 1)
      // What version 1 wrote: a done job with its result.
      try await queue.client.query(
        """
        WITH b AS (INSERT INTO darkroom_batches (id, name, pipeline, pipeline_sha256)
                   VALUES (gen_random_uuid(), 'old', '{}', 'x') RETURNING id),
             j AS (INSERT INTO darkroom_jobs (batch_id, source, source_key, state)
                   SELECT id, '/a.jpg', 'k', 'done' FROM b RETURNING id)
        INSERT INTO darkroom_results (job_id, name, bytes, sha256, size)
        SELECT id, 'a.jpg', '\\x010203'::bytea, \(RequestDigest.hex(of: [1, 2, 3] as [UInt8])), 3 FROM j
        """)
      #expect(try await queue.migrate() == (1, PostgresSchema.currentVersion))
      let batch = try await queue.batch("old")
      let job = try #require(try await queue.jobs(of: batch, states: [], after: 0, limit: 10).first)
      #expect(job.source == "/a.jpg" && job.name == "" && job.state == .done)
      #expect(try await queue.results(of: job.id) == [JobResult(bytes: [1, 2, 3], name: "a.jpg")])
    }
  }

  @Test("a job keeps one result per output; two outputs of one name are refused")
  func severalResults() async throws {
    try await withQueue { queue, _ in
      let batch = try await queue.enqueue(
        batch: "v", pipeline: pipeline, pipelineName: "sizes", sources: [JobSource("/p/a.jpg", name: "a-jpg")])
      let lease = try await claimOne(queue)
      #expect(lease.name == "a-jpg" && lease.pipelineName == "sizes")
      let twice = await #expect(throws: PipelineError.self) {
        try await queue.complete(lease, with: [JobResult(bytes: [1], name: "x.jpg"), JobResult(bytes: [2], name: "x.jpg")])
      }
      #expect(twice?.code == .invalidInput)
      let outputs = [JobResult(bytes: [1], name: "a-jpg-64.webp"), JobResult(bytes: [2, 2], name: "sub/a-jpg-128.webp")]
      #expect(try await queue.complete(lease, with: outputs))
      #expect(try await queue.results(of: lease.job) == outputs)
      #expect(try await queue.status(of: batch.id)[.done] == 1)
    }
  }

  @Test("a result over the database's limit goes to the shared folder, checked when read; without a folder it is tooLarge")
  func sharedFolder() async throws {
    let folder = NSTemporaryDirectory() + "darkroom-shared-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let big = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    try await withQueue(storage: ResultStorage(maxStoredBytes: 1_000, sharedFolder: folder)) { queue, location in
      _ = try await queue.enqueue(batch: "big", pipeline: pipeline, sources: ["/p/a.jpg", "/p/b.jpg"])
      let lease = try await claimOne(queue)
      #expect(
        try await queue.complete(lease, with: [JobResult(bytes: big, name: "a.jpg"), JobResult(bytes: [9], name: "s.jpg")]))
      var stored: [Bool] = []
      for try await isNull in try await queue.client.query("SELECT bytes IS NULL FROM darkroom_results ORDER BY name").decode(
        Bool.self)
      {
        stored.append(isNull)
      }
      #expect(stored == [true, false])  // a.jpg in the folder, s.jpg in the table
      #expect(try await queue.results(of: lease.job).first?.bytes == big)
      // The file changed on disk: refused by its checksum.
      let file = folder + "/" + SharedResultFolder.name(of: RequestDigest.hex(of: big))
      var damaged = big
      damaged[100] ^= 1
      try Data(damaged).write(to: URL(fileURLWithPath: file))
      let corrupt = await #expect(throws: PipelineError.self) { try await queue.results(of: lease.job) }
      #expect(corrupt?.code == .cacheCorrupt)
      // Replaced by a symlink to a file with the right bytes: never followed.
      let outside = folder + "-outside"
      try Data(big).write(to: URL(fileURLWithPath: outside))
      defer { try? FileManager.default.removeItem(atPath: outside) }
      try FileManager.default.removeItem(atPath: file)
      try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: outside)
      let linked = await #expect(throws: PipelineError.self) { try await queue.results(of: lease.job) }
      #expect(linked?.code == .notFound && linked?.message.contains("symbolic link") == true)
      // A reader without the folder is told where the result is.
      try await PostgresJobQueue.withQueue(at: location) { reader in
        let missing = await #expect(throws: PipelineError.self) { try await reader.results(of: lease.job) }
        #expect(missing?.message.contains("--shared-folder") == true)
      }
      // A writer without a folder: the job is dead with tooLarge, not retried.
      try await PostgresJobQueue.withQueue(at: location, storage: ResultStorage(maxStoredBytes: 1_000)) { writer in
        let other = try await claimOne(writer)
        let refused = await #expect(throws: PipelineError.self) { try await writer.complete(other, with: JobResult(bytes: big)) }
        #expect(refused?.code == .tooLarge && refused?.code.isPermanent == true)
      }
    }
  }

  @Test("batches are found by id or name; jobs are listed in pages and by state; dead jobs are retried")
  func listingAndRetry() async throws {
    try await withQueue { queue, _ in
      let sources = (0..<25).map { "/p/\($0).jpg" }
      let batch = try await queue.enqueue(batch: "list", pipeline: pipeline, sources: sources)
      #expect(try await queue.batch(batch.id.uuidString) == batch.id)
      #expect(try await queue.batch("list") == batch.id)
      let unknown = await #expect(throws: PipelineError.self) { try await queue.batch("nope") }
      #expect(unknown?.code == .notFound)
      var listed: [String] = []
      var after: Int64 = 0
      while true {
        let page = try await queue.jobs(of: batch.id, states: [], after: after, limit: 10)
        listed += page.map(\.source)
        guard let last = page.last else { break }
        after = last.id
      }
      #expect(listed == sources)
      for _ in 0..<3 {
        let lease = try await claimOne(queue)
        _ = try await queue.fail(lease, with: PipelineError(.corruptImage, "bad"), maxAttempts: 3)
      }
      let dead = try await queue.jobs(of: batch.id, states: [.dead], after: 0, limit: 100)
      #expect(dead.map(\.source) == Array(sources.prefix(3)) && dead.allSatisfy { $0.errorCode == "corruptImage" })
      #expect(try await queue.openJobs() == 22)
      #expect(try await queue.retry(batch: batch.id) == 3)
      #expect(try await queue.status(of: batch.id)[.queued] == 25)
      let again = try await claimOne(queue)
      #expect(again.source == sources[0] && again.attempt == 1)
    }
  }

  @Test("a job given back is claimed again at once without counting the attempt; claims can keep to one batch")
  func releaseAndBatchClaims() async throws {
    try await withQueue { queue, _ in
      let first = try await queue.enqueue(batch: "one", pipeline: pipeline, sources: ["/p/a.jpg"])
      let second = try await queue.enqueue(batch: "two", pipeline: pipeline, sources: ["/p/b.jpg"])
      let lease = try await claimOne(queue, batch: second.id)
      #expect(lease.batch == second.id && lease.source == "/p/b.jpg")
      #expect(try await queue.release(lease))
      #expect(try await queue.release(lease) == false)  // no longer this worker's
      let again = try await claimOne(queue, batch: second.id)
      #expect(again.source == "/p/b.jpg" && again.attempt == 1)
      #expect(try await queue.claim(worker: "w", limit: 5, lease: .seconds(30), maxAttempts: 3, batch: second.id).isEmpty)
      #expect(try await claimOne(queue).batch == first.id)
      var events: [String] = []
      for try await event in try await queue.client.query(
        "SELECT event FROM darkroom_ledger WHERE job_id = \(lease.job) ORDER BY id"
      ).decode(String.self) {
        events.append(event)
      }
      #expect(events == ["claimed", "released", "fenced", "claimed"])
    }
  }
}
