import DarkroomCore
import DarkroomPostgres
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

/// What an attack on the queue found (inputs in none of the first tests), each kept fixed.
@Suite("the PostgreSQL job queue under attack", .postgresServer)
struct PostgresQueueHardeningTests {
  private let pipeline = #"{"version": 1, "name": "t", "stages": []}"#

  @Test("a job whose worker always dies is dead after maxAttempts expired leases, not claimed for ever")
  func poisonJob() async throws {
    try await withNewQueue { queue in
      let batch = try await queue.enqueue(batch: "poison", pipeline: pipeline, sources: ["crash.jpg"])
      var attempts: [Int] = []
      for _ in 0..<5 {
        guard let lease = try await queue.claim(worker: "w", limit: 1, lease: .seconds(1), maxAttempts: 2).first else { break }
        attempts.append(lease.attempt)
        try await queue.client.query("UPDATE darkroom_jobs SET lease_expires_at = now() - interval '1 second'")
      }
      #expect(attempts == [1, 2])
      #expect(try await queue.status(of: batch.id) == BatchStatus(counts: [.dead: 1]))
      var error = ""
      for try await text in try await queue.client.query("SELECT last_error FROM darkroom_jobs").decode(String.self) {
        error = text
      }
      #expect(error.contains("lease expired on attempt 2"))
    }
  }

  @Test("a source of 8,192 bytes that does not compress is queued, and queued once")
  func longSource() async throws {
    try await withNewQueue { queue in
      var generator = SystemRandomNumberGenerator()
      let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
      let long =
        "https://example.com/"
        + String((0..<(PostgresJobQueue.maxSourceBytes - 20)).map { _ in letters[Int(generator.next() % UInt64(letters.count))] })
      #expect(long.utf8.count == PostgresJobQueue.maxSourceBytes)
      let first = try await queue.enqueue(batch: "long", pipeline: pipeline, sources: [long, long])
      let again = try await queue.enqueue(batch: "long", pipeline: pipeline, sources: [long])
      #expect(first.added == 1 && again.added == 0)
    }
  }

  @Test("NUL bytes and long texts are stored bounded in bytes: an error, a result name, a worker name")
  func storedTexts() async throws {
    try await withNewQueue { queue in
      _ = try await queue.enqueue(batch: "text", pipeline: pipeline, sources: ["a.jpg", "b.jpg"])
      let heavy = "e" + String(repeating: "\u{301}", count: 5_000)  // one character, 10,001 bytes
      let leases = try await queue.claim(worker: "w\u{0}" + heavy, limit: 2, lease: .seconds(30), maxAttempts: 3)
      #expect(leases.count == 2)
      let failed = try #require(leases.first { $0.source == "a.jpg" })
      let done = try #require(leases.first { $0.source == "b.jpg" })
      #expect(try await queue.fail(failed, with: PipelineError(.corruptImage, "bad\u{0}bytes " + heavy), maxAttempts: 3) == .dead)
      #expect(try await queue.complete(done, with: JobResult(bytes: [1], name: "out\u{0}" + heavy)))
      var sizes: [Int] = []
      for try await (worker, error) in try await queue.client.query(
        "SELECT octet_length(worker), coalesce(octet_length(last_error), 0) FROM darkroom_jobs ORDER BY source"
      ).decode((Int, Int).self) {
        sizes += [worker, error]
      }
      #expect(sizes[0] <= 200 && sizes[2] <= 200 && sizes[1] <= 4_096 && sizes[1] > 0)
      let stored = try #require(try await queue.result(of: done.job))
      #expect(stored.name.unicodeScalars.starts(with: "oute\u{301}".unicodeScalars) && stored.name.utf8.count <= 1_024)
    }
  }

  @Test("a pipeline over 1 MiB is refused, and a claim carries each batch's pipeline once")
  func pipelineSize() async throws {
    try await withNewQueue { queue in
      let huge = #"{"version": 1, "name": ""# + String(repeating: "x", count: PostgresJobQueue.maxPipelineBytes) + #""}"#
      await #expect(throws: PipelineError.self) { try await queue.enqueue(batch: "huge", pipeline: huge, sources: ["a"]) }
      let big = #"{"version": 1, "name": ""# + String(repeating: "y", count: 100_000) + #"", "stages": []}"#
      _ = try await queue.enqueue(batch: "big", pipeline: big, sources: (0..<50).map { "s\($0)" })
      let leases = try await queue.claim(worker: "w", limit: 50, lease: .seconds(30), maxAttempts: 3)
      #expect(leases.count == 50 && leases.allSatisfy { $0.pipeline == big })
    }
  }

  @Test("a lease for a job that does not exist: false, nil and false, with no ledger row")
  func missingJob() async throws {
    try await withNewQueue { queue in
      let batch = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["a.jpg"])
      let ghost = JobLease(
        job: 999_999, batch: batch.id, source: "x", pipeline: pipeline, worker: "w", attempt: 1, token: UUID(), expiresAt: Date())
      #expect(try await queue.complete(ghost, with: JobResult(bytes: [1])) == false)
      #expect(try await queue.fail(ghost, with: PipelineError(.timedOut, "t"), maxAttempts: 3) == nil)
      #expect(try await queue.heartbeat(ghost, extendingBy: .seconds(5)) == false)
      let unknown = await #expect(throws: PipelineError.self) { try await queue.status(of: UUID()) }
      #expect(unknown?.code == .notFound)
    }
  }

  @Test("a queue that cannot be reached fails at once with queueUnavailable and its cause")
  func unreachable() async throws {
    let server = try PostgresTestServer.suite
    let missing = try PostgresLocation("postgres://darkroom@/nothing?host=\(server.folder)/no-such-folder")
    let started = ContinuousClock.now
    let refused = await #expect(throws: PipelineError.self) {
      try await PostgresJobQueue.withQueue(at: missing) { _ in }
    }
    #expect(ContinuousClock.now - started < .seconds(10))
    #expect(refused?.code == .queueUnavailable && refused?.message.contains("no-such-folder") == true)
  }

  @Test("a claim held by another session's lock past the queue's limit fails, and never claims afterwards")
  func claimBehindALock() async throws {
    let location = try await PostgresTestServer.suite.newDatabase()
    try await PostgresJobQueue.withQueue(at: location) { queue in
      _ = try await queue.enqueue(batch: "locked", pipeline: pipeline, sources: ["a.jpg", "b.jpg"])
      try await whileLocked("darkroom_jobs", in: location) {
        let error = await #expect(throws: PipelineError.self) {
          _ = try await queue.claim(worker: "w", limit: 2, lease: .seconds(60), maxAttempts: 3)
        }
        #expect(error?.code == .queueUnavailable)
      }
      // The statement the queue gave up on was ended by the server, not left to claim the jobs
      // for nobody once the lock went.
      var running: [Int64] = []
      for try await count in try await queue.client.query("SELECT count(*) FROM darkroom_jobs WHERE state <> 'queued'")
        .decode(Int64.self)
      {
        running.append(count)
      }
      #expect(running == [0])
      #expect(try await queue.claim(worker: "w", limit: 2, lease: .seconds(60), maxAttempts: 3).count == 2)
    }
  }
}

@Suite("postgres:// URLs under attack")
struct PostgresLocationHardeningTests {
  @Test("an IPv6 host loses its brackets; NUL, broken escapes, a huge port and a repeated option are refused")
  func oddURLs() throws {
    let v6 = try PostgresLocation("postgres://[::1]:5433/db")
    #expect(v6.host == "::1" && v6.port == 5433)
    for bad in [
      "postgres://h/db%00options", "postgres://u%00x@h/db", "postgres://u:p%00@h/db", "postgres://h/%FF",
      "postgres://%FF@h/db", "postgres://u:%FF@h/db", "postgres://h:99999999999999999999/db",
      "postgres://h/db?host=/a&host=/b", "postgres://h/db?sslmode=disable&sslmode=require",
    ] {
      #expect(throws: PipelineError.self, "\(bad)") { try PostgresLocation(bad) }
    }
  }
}
