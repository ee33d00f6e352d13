import DarkroomCore
import DarkroomPostgres
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

/// What the queue's tables hand back is not trusted: rows changed behind the queue's back
/// (found by an attack on the commands) never stop the queue, overflow, or pass for results.
@Suite("the PostgreSQL job queue reads its own tables as hostile", .postgresServer)
struct PostgresQueueTamperTests {
  private let pipeline = #"{"version": 1, "name": "t", "stages": []}"#

  @Test("an attempts count at Int32.max and leases at infinity or NULL never stop claims; those jobs are claimed again")
  func attemptsAndLeases() async throws {
    try await withNewQueue { queue in
      _ = try await queue.enqueue(batch: "t", pipeline: pipeline, sources: ["/a.jpg", "/b.jpg", "/c.jpg"])
      try await queue.client.query("UPDATE darkroom_jobs SET attempts = 2147483647 WHERE source = '/a.jpg'")
      try await queue.client.query(
        "UPDATE darkroom_jobs SET state = 'running', attempts = 1, lease_expires_at = 'infinity' WHERE source = '/b.jpg'")
      try await queue.client.query(
        "UPDATE darkroom_jobs SET state = 'running', attempts = 1, lease_expires_at = NULL WHERE source = '/c.jpg'")
      let leases = try await queue.claim(worker: "w", limit: 10, lease: .seconds(30), maxAttempts: 3)
      #expect(leases.map(\.source).sorted() == ["/a.jpg", "/b.jpg", "/c.jpg"])
      #expect(leases.first { $0.source == "/a.jpg" }?.attempt == 1_000_001)
      #expect(try await queue.openJobs() == 3)
    }
  }

  @Test("output names stay unique in a batch across enqueues, without regard to case")
  func uniqueNames() async throws {
    try await withNewQueue { queue in
      let first = try await queue.enqueue(
        batch: "n", pipeline: pipeline, pipelineName: "p", sources: [JobSource("/a/x.jpg", name: "x")])
      _ = try await queue.enqueue(
        batch: "n", pipeline: pipeline, pipelineName: "p",
        sources: [JobSource("/b/x.jpg", name: "x"), JobSource("/c/X.jpg", name: "X"), JobSource("/a/x.jpg", name: "x")])
      _ = try await queue.enqueue(batch: "n", pipeline: pipeline, pipelineName: "p", sources: [JobSource("/d/y.png")])
      let names = try await queue.jobs(of: first.id, states: [], after: 0, limit: 10).map(\.name)
      #expect(names.count == 4 && names[0] == "x" && names[3] == "y")
      #expect(names[1].hasPrefix("x-") && names[1].count == 10 && names[2].hasPrefix("X-") && names[2].count == 10)
      #expect(Set(names.map { $0.lowercased() }).count == 4)
    }
  }

  @Test("a done job whose result row was deleted, or whose bytes grew, is reported; a pipeline grown past 1 MiB is read as none")
  func missingResultsAndGrownPipelines() async throws {
    try await withNewQueue { queue in
      let batch = try await queue.enqueue(batch: "r", pipeline: pipeline, sources: ["/a.jpg", "/b.jpg"])
      for lease in try await queue.claim(worker: "w", limit: 2, lease: .seconds(30), maxAttempts: 3) {
        let results = [JobResult(bytes: [1, 2, 3], name: lease.source.dropFirst() + ".1"), JobResult(bytes: [4], name: "z")]
        #expect(
          try await queue.complete(
            lease,
            with: results.map {
              var r = $0
              r.name += lease.source
              return r
            }))
      }
      let jobs = try await queue.jobs(of: batch.id, states: [.done], after: 0, limit: 10).map(\.id)
      try await queue.client.query("DELETE FROM darkroom_results WHERE job_id = \(jobs[0]) AND name LIKE 'z%'")
      try await queue.client.query("UPDATE darkroom_results SET bytes = bytes || '\\x00'::bytea WHERE job_id = \(jobs[1])")
      let read = try await queue.results(of: jobs)
      for job in jobs {
        guard case .failure(let error) = read[job] else {
          Issue.record("job \(job) read as fine")
          continue
        }
        #expect(error.code == .cacheCorrupt)
      }
      let grown = String(repeating: " ", count: (1 << 20) + 1) + pipeline
      let other = try await queue.enqueue(batch: "g", pipeline: pipeline, sources: ["/c.jpg"])
      try await queue.client.query("UPDATE darkroom_batches SET pipeline = \(grown) WHERE id = \(other.id)")
      let lease = try #require(try await queue.claim(worker: "w", limit: 1, lease: .seconds(30), maxAttempts: 3).first)
      #expect(lease.pipeline.isEmpty)
    }
  }
}
