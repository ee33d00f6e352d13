import DarkroomCore
import DarkroomPostgres
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

/// A completion that claims the next jobs in the same statement, and the prepared statements
/// behind both, on a real PostgreSQL server.
@Suite("completing and claiming in one call", .postgresServer)
struct PostgresCompletionTests {
  private let pipeline = #"{"version": 1, "name": "t", "stages": []}"#

  /// The ledger's events, in order, as "event job".
  private func ledger(_ queue: PostgresJobQueue) async throws -> [String] {
    var events: [String] = []
    for try await (event, job) in try await queue.client.query("SELECT event, job_id FROM darkroom_ledger ORDER BY id")
      .decode((String, Int64).self)
    {
      events.append("\(event) \(job)")
    }
    return events
  }

  @Test("a completion claims the next jobs of its batch, never the job it completes, and commits its result")
  func completesAndClaims() async throws {
    try await withNewQueue { queue in
      let batch = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["a.jpg", "b.jpg", "c.jpg"])
      let other = try await queue.enqueue(batch: "o", pipeline: pipeline, sources: ["x.jpg"])
      let first = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      // The completed job's lease is over, so that a claim could take it again: it must not.
      try await queue.client.query(
        "UPDATE darkroom_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = \(first.job)")
      let next = ClaimRequest(limit: 5, lease: .seconds(30), maxAttempts: 3, batch: batch.id)
      let (completed, claimed) = try await queue.complete(
        first, with: [JobResult(bytes: [7, 8], name: "a.out")], thenClaiming: next)
      #expect(completed)
      #expect(claimed.map(\.source) == ["b.jpg", "c.jpg"])
      #expect(claimed.allSatisfy { $0.batch == batch.id && $0.attempt == 1 && $0.pipeline == pipeline && $0.worker == "w" })
      #expect(try await queue.results(of: first.job) == [JobResult(bytes: [7, 8], name: "a.out")])
      #expect(try await queue.status(of: batch.id) == BatchStatus(counts: [.done: 1, .running: 2]))
      #expect(try await queue.status(of: other.id) == BatchStatus(counts: [.queued: 1]))
      let ids = claimed.map(\.job)
      // One statement's steps happen in no set order: the events are compared as a set.
      #expect(
        try await ledger(queue).sorted()
          == ["claimed \(first.job)", "done \(first.job)", "claimed \(ids[0])", "claimed \(ids[1])"].sorted())
      // The claimed leases are the queue's real ones: they complete, and a claim of 0 takes nothing.
      let last = try await queue.complete(
        claimed[0], with: [], thenClaiming: ClaimRequest(limit: 0, lease: .seconds(30), maxAttempts: 3))
      #expect(last.completed && last.claimed.isEmpty)
      #expect(try await queue.complete(claimed[1], with: []))
      #expect(try await queue.status(of: batch.id) == BatchStatus(counts: [.done: 3]))
    }
  }

  @Test("a completion refused (another worker holds the job) stores nothing, and still claims")
  func fencedStillClaims() async throws {
    try await withNewQueue { queue in
      _ = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["a.jpg", "b.jpg"])
      let stale = try #require(try await queue.claim(worker: "old", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      try await queue.client.query(
        "UPDATE darkroom_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = \(stale.job)")
      let current = try #require(try await queue.claim(worker: "new", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(current.job == stale.job && current.token != stale.token)
      let next = ClaimRequest(limit: 1, lease: .seconds(30), maxAttempts: 3)
      let (completed, claimed) = try await queue.complete(stale, with: [JobResult(bytes: [1], name: "a.out")], thenClaiming: next)
      #expect(!completed)
      #expect(claimed.map(\.source) == ["b.jpg"])
      #expect(try await queue.results(of: stale.job).isEmpty)
      #expect(try await ledger(queue).contains("fenced \(stale.job)"))
      // The same call repeated by the lease that did complete the job (its reply lost) is success.
      #expect(try await queue.complete(current, with: [JobResult(bytes: [2], name: "a.out")]))
      let again = try await queue.complete(current, with: [JobResult(bytes: [2], name: "a.out")], thenClaiming: next)
      #expect(again.completed && again.claimed.isEmpty)
    }
  }

  @Test("a column whose type changed under the prepared statements costs one failed call, not every later one")
  func preparedStatementsRecover() async throws {
    try await withNewQueue { queue in
      _ = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: (0..<6).map { "\($0).jpg" })
      let first = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(try await queue.complete(first, with: []))
      // The statements are prepared on the connection; the claim's result type changes under them.
      try await queue.client.query("ALTER TABLE darkroom_jobs ALTER COLUMN attempts TYPE bigint")
      var outcomes: [Bool] = []
      for _ in 0..<4 {
        do {
          let lease = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
          outcomes.append(try await queue.complete(lease, with: []))
        } catch let error as PipelineError {
          #expect(error.code == .queueUnavailable, "\(error)")
          outcomes.append(false)
        }
      }
      // At most one call per connection fails (the pool holds one or two here); the rest work.
      #expect(outcomes.suffix(2) == [true, true], "\(outcomes)")
      #expect(outcomes.filter { $0 }.count >= 2)
    }
  }

  @Test("a completion whose claim cannot read the batches commits nothing: no job is left claimed for nobody")
  func nothingAfterTheCommit() async throws {
    let location = try await PostgresTestServer.suite.newDatabase()
    try await PostgresJobQueue.withQueue(at: location) { queue in
      _ = try await queue.enqueue(batch: "a", pipeline: pipeline, sources: ["a.jpg"])
      let other = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["b.jpg"])
      let lease = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(60), maxAttempts: 3).first)
      // Batch b's pipeline is not known here: the claim must read it, and cannot.
      let next = ClaimRequest(limit: 1, lease: .seconds(60), maxAttempts: 3, batch: other.id)
      try await whileLocked("darkroom_batches", in: location) {
        let error = await #expect(throws: PipelineError.self) {
          _ = try await queue.complete(lease, with: [JobResult(bytes: [1], name: "a.out")], thenClaiming: next)
        }
        #expect(error?.code == .queueUnavailable)
      }
      // All or nothing: the completion is not committed either, and b's job waits for a worker.
      #expect(try await queue.status(of: other.id) == BatchStatus(counts: [.queued: 1]))
      let (completed, claimed) = try await queue.complete(lease, with: [JobResult(bytes: [1], name: "a.out")], thenClaiming: next)
      #expect(completed && claimed.map(\.source) == ["b.jpg"] && claimed.first?.pipeline == pipeline)
    }
  }

  @Test("a result the tables refuse (a done job queued again by hand, its results still there) fails the job, not for ever")
  func refusedResult() async throws {
    try await withNewQueue { queue in
      let batch = try await queue.enqueue(batch: "b", pipeline: pipeline, sources: ["a.jpg"])
      let first = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(try await queue.complete(first, with: [JobResult(bytes: [1], name: "a.out")]))
      try await queue.client.query("UPDATE darkroom_jobs SET state = 'queued', lease_token = NULL WHERE id = \(first.job)")
      let again = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      let next = ClaimRequest(limit: 1, lease: .seconds(30), maxAttempts: 3)
      let refused = await #expect(throws: PipelineError.self) {
        _ = try await queue.complete(again, with: [JobResult(bytes: [2], name: "a.out")], thenClaiming: next)
      }
      // Not "unavailable" (a worker would retry that until the lease ends, then again and again).
      #expect(refused?.code == .invalidInput && refused?.message.contains("refuse") == true, "\(String(describing: refused))")
      #expect(try await queue.fail(again, with: try #require(refused), maxAttempts: 3) == .dead)
      #expect(try await queue.status(of: batch.id) == BatchStatus(counts: [.dead: 1]))
    }
  }
}
