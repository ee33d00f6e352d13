import DarkroomCore
import DarkroomPostgres
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

/// The queue on a real PostgreSQL server (one per suite, a database per test).
@Suite("the PostgreSQL job queue", .postgresServer)
struct PostgresJobQueueTests {
  private let pipeline = #"{"version": 1, "name": "t", "stages": []}"#

  private func withQueue<T: Sendable>(_ body: @Sendable (PostgresJobQueue, PostgresLocation) async throws -> T) async throws -> T
  {
    let location = try await PostgresTestServer.suite.newDatabase()
    return try await PostgresJobQueue.withQueue(at: location) { try await body($0, location) }
  }

  @Test("the tables are made on first use, by many processes at once, and a second prepare changes nothing")
  func migrations() async throws {
    try await withQueue { queue, location in
      // Four more clients of the same database prepare it together.
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
          group.addTask { try await PostgresJobQueue.withQueue(at: location) { try await $0.prepare() } }
        }
        try await group.waitForAll()
      }
      var versions: [Int] = []
      for try await version in try await queue.client.query("SELECT version FROM darkroom_schema ORDER BY version").decode(
        Int.self)
      {
        versions.append(version)
      }
      #expect(versions == [1, 2, 3, 4, 5])
      // Version 5: images are stored as they are, never run through PostgreSQL's compression.
      var storage: [String] = []
      for try await kind in try await queue.client.query(
        """
        SELECT attstorage::text FROM pg_attribute
        WHERE attname = 'bytes' AND attrelid IN ('darkroom_results'::regclass, 'darkroom_cache'::regclass)
        """
      ).decode(String.self) {
        storage.append(kind)
      }
      #expect(storage == ["e", "e"])
      // A database from a newer darkroom is refused, not written.
      try await queue.client.query("INSERT INTO darkroom_schema (version) VALUES (99)")
      let refused = await #expect(throws: PipelineError.self) { try await queue.prepare() }
      #expect(refused?.code == .queueUnavailable && refused?.message.contains("version 99") == true)
    }
  }

  @Test("enqueueing the same source twice adds it once; another pipeline under the batch's name is refused")
  func idempotentEnqueue() async throws {
    try await withQueue { queue, _ in
      let first = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["a.jpg", "b.jpg", "a.jpg"])
      #expect(first.added == 2)
      let again = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["b.jpg", "c.jpg"])
      #expect(again.id == first.id && again.added == 1)
      #expect(try await queue.status(of: first.id)[.queued] == 3)
      await #expect(throws: PipelineError.self) {
        try await queue.enqueue(batch: "b", pipeline: #"{"version": 1, "name": "other", "stages": []}"#, sources: ["d.jpg"])
      }
      for bad in ["", String(repeating: "x", count: PostgresJobQueue.maxSourceBytes + 1), "a\u{0}b"] {
        await #expect(throws: PipelineError.self) { try await queue.enqueue(batch: "b", pipeline: pipeline, sources: [bad]) }
      }
      // A finished job is not redone when its source is enqueued again.
      let lease = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(try await queue.complete(lease, with: JobResult(bytes: [1, 2, 3], name: "a.jpg")))
      #expect(try await queue.enqueue(batch: "b", pipeline: pipeline, sources: [lease.source]).added == 0)
      #expect(try await queue.status(of: first.id)[.done] == 1)
    }
  }

  @Test("workers claiming at once never get the same job, and every job is claimed once")
  func concurrentClaims() async throws {
    try await withQueue { queue, location in
      let sources = (0..<300).map { "photo-\($0).jpg" }
      let batch = try await queue.enqueue(batch: "many", pipeline: pipeline, sources: sources)
      let claimed = try await withThrowingTaskGroup(of: [JobLease].self) { group in
        for worker in 0..<4 {
          group.addTask {
            try await PostgresJobQueue.withQueue(at: location) { own in
              var mine: [JobLease] = []
              while true {
                let leases = try await own.claim(worker: "w\(worker)", limit: 7, lease: .seconds(60), maxAttempts: 3)
                if leases.isEmpty { return mine }
                mine += leases
              }
            }
          }
        }
        return try await group.reduce(into: []) { $0 += $1 }
      }
      #expect(claimed.count == 300)
      #expect(Set(claimed.map(\.job)).count == 300)
      #expect(Set(claimed.map(\.source)) == Set(sources))
      #expect(claimed.allSatisfy { $0.attempt == 1 && $0.pipeline == pipeline && $0.batch == batch.id })
      #expect(try await queue.status(of: batch.id)[.running] == 300)
    }
  }

  @Test("a lease that expires is claimed again; the first worker's late result is refused and the ledger says so")
  func expiredLeaseIsFenced() async throws {
    try await withQueue { queue, _ in
      let batch = try await queue.enqueue(batch: "lease", pipeline: pipeline, sources: ["a.jpg"])
      let first = try #require(try await queue.claim(worker: "dead", limit: 1, lease: .seconds(60), maxAttempts: 3).first)
      #expect(try await queue.claim(worker: "other", limit: 1, lease: .seconds(30), maxAttempts: 3).isEmpty)
      // The lease runs out (on the server's clock, as the worker's silence would make it).
      try await queue.client.query(
        "UPDATE darkroom_jobs SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = \(first.job)")
      let second = try #require(try await queue.claim(worker: "alive", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(second.job == first.job && second.attempt == 2 && second.token != first.token)
      #expect(try await queue.heartbeat(first, extendingBy: .seconds(30)) == false)
      #expect(try await queue.complete(first, with: JobResult(bytes: [9], name: "late")) == false)
      #expect(try await queue.fail(first, with: PipelineError(.timedOut, "late"), maxAttempts: 3) == nil)
      #expect(try await queue.heartbeat(second, extendingBy: .seconds(30)))
      #expect(try await queue.complete(second, with: JobResult(bytes: [1, 2], name: "a.jpg")))
      #expect(try await queue.result(of: second.job) == JobResult(bytes: [1, 2], name: "a.jpg"))
      #expect(try await queue.status(of: batch.id) == BatchStatus(counts: [.done: 1]))
      var events: [String] = []
      for try await event in try await queue.client.query(
        "SELECT event || ':' || worker FROM darkroom_ledger WHERE job_id = \(first.job) ORDER BY id"
      ).decode(String.self) {
        events.append(event)
      }
      #expect(events == ["claimed:dead", "claimed:alive", "fenced:dead", "fenced:dead", "done:alive"])
      // The winner's call repeated (its reply lost) is still a success, and not a refusal.
      #expect(try await queue.complete(second, with: JobResult(bytes: [1, 2], name: "a.jpg")))
      #expect(try await queue.result(of: second.job) == JobResult(bytes: [1, 2], name: "a.jpg"))
    }
  }

  @Test("a failed attempt is retried until maxAttempts; a permanent error is dead at once, with its error")
  func failures() async throws {
    try await withQueue { queue, _ in
      let batch = try await queue.enqueue(batch: "fail", pipeline: pipeline, sources: ["flaky.jpg", "broken.jpg"])
      let leases = try await queue.claim(worker: "w", limit: 2, lease: .seconds(30), maxAttempts: 3)
      let flaky = try #require(leases.first { $0.source == "flaky.jpg" })
      let broken = try #require(leases.first { $0.source == "broken.jpg" })
      #expect(try await queue.fail(broken, with: PipelineError(.corruptImage, "bad bytes"), maxAttempts: 3) == .dead)
      #expect(try await queue.fail(flaky, with: PipelineError(.timedOut, "slow"), maxAttempts: 2) == .queued)
      let retry = try #require(try await queue.claim(worker: "w", limit: 2, lease: .seconds(30), maxAttempts: 3).first)
      #expect(retry.source == "flaky.jpg" && retry.attempt == 2)
      #expect(try await queue.fail(retry, with: PipelineError(.httpStatus, "502"), maxAttempts: 2) == .dead)
      #expect(try await queue.claim(worker: "w", limit: 2, lease: .seconds(30), maxAttempts: 3).isEmpty)
      let status = try await queue.status(of: batch.id)
      #expect(status[.dead] == 2 && status.isFinished)
      var errors: [String] = []
      for try await error in try await queue.client.query(
        "SELECT last_error_code || ': ' || last_error FROM darkroom_jobs ORDER BY source"
      ).decode(String.self) {
        errors.append(error)
      }
      #expect(errors == ["corruptImage: bad bytes", "httpStatus: 502"])
    }
  }

  @Test("a stored result whose bytes were changed in the database is refused by its checksum")
  func damagedResult() async throws {
    try await withQueue { queue, _ in
      _ = try await queue.enqueue(batch: "sum", pipeline: pipeline, sources: ["a.jpg"])
      let lease = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(try await queue.complete(lease, with: JobResult(bytes: Array(repeating: 7, count: 1_000), name: "a.jpg")))
      try await queue.client.query("UPDATE darkroom_results SET bytes = overlay(bytes placing '\\x08'::bytea from 10)")
      await #expect(throws: PipelineError.self) { try await queue.result(of: lease.job) }
    }
  }

  @Test("bad claims and leases are refused before the database is asked")
  func boundaries() async throws {
    try await withQueue { queue, _ in
      for (limit, lease) in [(0, Duration.seconds(30)), (1_001, .seconds(30)), (1, .milliseconds(10)), (1, .seconds(86_401))] {
        await #expect(throws: PipelineError.self) {
          try await queue.claim(worker: "w", limit: limit, lease: lease, maxAttempts: 3)
        }
      }
    }
  }
}

@Suite("postgres:// URLs")
struct PostgresLocationTests {
  @Test("a URL's parts, a socket folder, and every bad part refused with a message that hides the password")
  func locations() throws {
    let tcp = try PostgresLocation("postgres://me:s%40cret@db.internal:6543/images?sslmode=require")
    #expect(tcp.username == "me" && tcp.password == "s@cret" && tcp.host == "db.internal" && tcp.port == 6543)
    #expect(tcp.database == "images" && tcp.sslMode == .require && !tcp.description.contains("cret"))
    let socket = try PostgresLocation("postgresql://darkroom@/jobs?host=/run/postgresql")
    #expect(socket.socketFolder == "/run/postgresql" && socket.host == nil && socket.database == "jobs")
    #expect(socket.configuration.unixSocketPath == "/run/postgresql/.s.PGSQL.5432")
    let defaults = try PostgresLocation("postgres://db")
    #expect(defaults.username == "postgres" && defaults.database == "postgres" && defaults.port == 5432)
    for bad in [
      "http://db/x", "postgres://db:0/x", "postgres://db:70000/x", "postgres://db/a/b", "postgres://db/x?host=relative",
      "postgres://db/x?sslmode=maybe", "postgres://db/x?color=red", "postgres:///x", "not a url",
    ] {
      #expect(throws: PipelineError.self, "\(bad)") { try PostgresLocation(bad) }
    }
  }
}
