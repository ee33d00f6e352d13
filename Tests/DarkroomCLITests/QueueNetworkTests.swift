import DarkroomPostgresTestServer
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Workers as if on machines of their own: each in a network namespace of the project's own
/// (``TestHosts``), reaching PostgreSQL only over its veth link, with one host cut off from the
/// network in the middle of a batch.
@Suite("darkroom worker on test hosts of its own, over veth links")
struct QueueNetworkTests {
  typealias Setup = QueueWorkerTests.Setup

  @Test("two workers on two hosts share a batch over TCP; one host cut off at 30 %: its jobs are taken over, none done twice")
  func workersOnTheirOwnHosts() async throws {
    let hosts: TestHosts
    do {
      hosts = try await TestHosts.make(2)
    } catch let unavailable as TestHosts.Unavailable {
      try Test.cancel("skipped: test hosts cannot be made here: \(unavailable.description)")
    }
    let server: PostgresTestServer
    do {
      server = try await PostgresTestServer.start(listeningOn: hosts.hosts.map(\.gateway))
    } catch {
      await hosts.remove()
      throw error
    }
    let setup: Setup
    do {
      setup = Setup(
        server: server, location: try await server.newDatabase(), folder: try Runner.temporaryDirectory(), ownsServer: true)
    } catch {
      await server.stop()
      await hosts.remove()
      throw error
    }
    do {
      try await shareBatch(setup, hosts)
    } catch {
      await setup.stop()
      await hosts.remove()
      throw error
    }
    await setup.stop()
    await hosts.remove()
  }

  private func shareBatch(_ setup: Setup, _ hosts: TestHosts) async throws {
    let inputs = try setup.inputs(240)
    let pipeline = try setup.pipeline("fit48", QueueWorkerTests.fit48)
    let reference = setup.folder + "/reference"
    let run = try await Runner.run(["run", pipeline, inputs, "-o", reference, "--quiet", "--jobs", "2"])
    #expect(run.status == 0, "\(run.stderr)")
    // Enqueued from this machine, over the socket; worked on the hosts, over TCP on their links.
    let enqueued = try await Runner.run(["enqueue", pipeline, inputs, "--queue", setup.url, "--batch", "hosts"])
    #expect(enqueued.status == 0 && enqueued.stderr.contains("240 new jobs"), "\(enqueued.stderr)")
    let workers = try hosts.hosts.map { host in
      try hosts.start(
        [
          "worker", "--queue", "postgres://darkroom@\(host.gateway):5432/\(setup.location.database)", "--jobs", "2",
          "--lease", "3", "--exit-when-idle",
        ], on: host)
    }
    let names = workers.map { "%:\($0.process.processIdentifier)" }
    func done(by name: String?) async throws -> Int64 {
      guard let name else {
        return try await setup.numbers("SELECT count(*) FROM darkroom_jobs WHERE state = 'done'").first ?? 0
      }
      return try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'done' AND worker LIKE \(name)")
        .first ?? 0
    }
    // Cut the first host off once both hosts have done some of the batch and 30 % is done.
    while true {
      let total = try await done(by: nil)
      let first = try await done(by: names[0])
      let second = try await done(by: names[1])
      if total >= 72, first >= 5, second >= 5 { break }
      if let ended = workers.first(where: { !$0.process.isRunning }) {
        let result = await ended.finish()
        Issue.record("a worker ended before the cut: \(result.status) \(result.stderr)")
        for worker in workers where worker.process.isRunning { kill(worker.process.processIdentifier, SIGKILL) }
        for worker in workers { _ = await worker.finish() }
        return
      }
      try await Task.sleep(for: .milliseconds(20))  // polling the database's counts
    }
    try await hosts.setLink(of: hosts.hosts[0], up: false)
    let held = try await setup.numbers(
      "SELECT id FROM darkroom_jobs WHERE state = 'running' AND worker LIKE \(names[0])")
    // The other host finishes the batch, taking over the cut-off host's jobs once their leases ran out.
    let other = await workers[1].finish()
    #expect(other.status == 0, "\(other.stderr)")
    let status = try await Runner.run(["batch", "status", "hosts", "--queue", setup.url])
    #expect(status.status == 0 && status.stdout.contains("done 240, dead 0"), "\(status.stdout)\(status.stderr)")
    // Joined again, the first host's late completions are refused (fenced) and it stops by itself.
    try await hosts.setLink(of: hosts.hosts[0], up: true)
    let cut = await workers[0].finish()
    #expect(cut.status == 0, "\(cut.stderr)")
    // Every job done once; only jobs the cut-off host held were claimed twice.
    #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'done'") == [240])
    #expect(try await setup.numbers("SELECT count(DISTINCT job_id) FROM darkroom_ledger WHERE event = 'done'") == [240])
    let redone = try await setup.numbers(
      "SELECT job_id FROM darkroom_ledger WHERE event = 'claimed' GROUP BY job_id HAVING count(*) > 1 ORDER BY job_id")
    #expect(Set(redone).isSubset(of: Set(held)), "redone \(redone), held \(held)")
    let output = setup.folder + "/downloaded"
    let results = try await Runner.run(["batch", "results", "hosts", "--queue", setup.url, "-o", output])
    #expect(results.status == 0 && results.stderr.contains("wrote 240 files"), "\(results.stderr)")
    let compared = try setup.sameFiles(reference, output)
    #expect(compared.count == 240 && compared.same)
    // The workers' connections came from the hosts' own addresses, over their links.
    let log = setup.server.log()
    for host in hosts.hosts {
      #expect(log.contains("connection received: host=\(host.address)"), "no connection from \(host.address)")
    }
  }
}
