import DarkroomCore
import DarkroomPostgres
import DarkroomPostgresTestServer
import Foundation
import PostgresNIO
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `darkroom enqueue`, `worker`, `batch` and `run --queue` as processes, on a real PostgreSQL
/// server: work shared by several workers, one killed, the database restarted, and outputs
/// byte-identical to `darkroom run`.
@Suite("darkroom worker and run --queue on PostgreSQL")
struct QueueWorkerTests {
  /// A PostgreSQL server and a database for one test, and a folder for its files.
  struct Setup {
    let server: PostgresTestServer
    let location: PostgresLocation
    let folder: String
    /// Whether the server is this test's alone (stopped with it), not the process's shared one.
    var ownsServer = false
    var url: String { "postgres://darkroom@/\(location.database)?host=\(server.sockets)" }

    /// A database on the process's shared server, or (`ownServer`, for a test that restarts it)
    /// on a server of the test's own.
    static func start(ownServer: Bool = false) async throws -> Setup {
      let server = ownServer ? try await PostgresTestServer.start() : try await PostgresTestServer.shared()
      do {
        return Setup(
          server: server, location: try await server.newDatabase(), folder: try Runner.temporaryDirectory(),
          ownsServer: ownServer)
      } catch {
        if ownServer { await server.stop() }
        throw error
      }
    }

    func stop() async {
      if ownsServer { await server.stop() }
      try? FileManager.default.removeItem(atPath: folder)
    }

    /// Runs `body` with a new setup (see ``start(ownServer:)``), stopped whatever happens.
    static func with(ownServer: Bool = false, _ body: (Setup) async throws -> Void) async throws {
      let setup = try await start(ownServer: ownServer)
      do {
        try await body(setup)
      } catch {
        await setup.stop()
        throw error
      }
      await setup.stop()
    }

    /// Integers from a query on the test's database.
    func numbers(_ query: PostgresQuery) async throws -> [Int64] {
      try await PostgresJobQueue.withQueue(at: location, preparing: false) { queue in
        var values: [Int64] = []
        for try await value in try await queue.client.query(query).decode(Int64.self) { values.append(value) }
        return values
      }
    }

    /// A pipeline file in the test's folder.
    func pipeline(_ name: String, _ json: String) throws -> String {
      let path = folder + "/\(name).json"
      try json.write(toFile: path, atomically: true, encoding: .utf8)
      return path
    }

    /// `count` inputs under distinct names: hard links to the test's own copies of the example
    /// images, in turn (a link to a shared file would change its ctime, the file's version, under
    /// a test running beside this one).
    func inputs(_ count: Int) throws -> String {
      let images = ["dunes.jpg", "portrait-rotated.jpg", "rings.png", "checker.webp"]
      let path = folder + "/inputs"
      let originals = folder + "/originals"
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
      try FileManager.default.createDirectory(atPath: originals, withIntermediateDirectories: true)
      for image in images {
        try FileManager.default.copyItem(
          atPath: Runner.package.path + "/Examples/images/" + image, toPath: originals + "/" + image)
      }
      for index in 0..<count {
        let image = images[index % images.count]
        let original = originals + "/" + image
        guard link(original, path + String(format: "/p%04d-", index) + image) == 0 else {
          throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
      }
      return path
    }

    /// Files in `a` and `b` (recursively) with their bytes: equal when both folders hold the same.
    func sameFiles(_ a: String, _ b: String) throws -> (count: Int, same: Bool) {
      func files(_ root: String) throws -> [String: Data] {
        var found: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let name = enumerator?.nextObject() as? String {
          var isFolder: ObjCBool = false
          if FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isFolder), !isFolder.boolValue {
            found[name] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + name))
          }
        }
        return found
      }
      let one = try files(a)
      return (one.count, one == (try files(b)))
    }
  }

  static let fit48 = """
    {"version": 1, "name": "fit48", "stages": [{"stage": "fetch"}, {"stage": "decode"},
      {"stage": "resize", "width": 48, "height": 48, "mode": "fit"}, {"stage": "encode", "format": "jpeg", "quality": 70}]}
    """

  @Test("run --queue writes the files run writes, with variants and write stages; run again, it recomputes nothing")
  func runQueuedMatchesRun() async throws {
    try await Setup.with { setup in
      let inputs = try setup.inputs(8)
      let written = try setup.pipeline(
        "written",
        """
        {"version": 1, "name": "written", "stages": [{"stage": "fetch"}, {"stage": "decode"},
          {"stage": "resize", "width": 40, "height": 40, "mode": "fill"}, {"stage": "encode", "format": "png"},
          {"stage": "write", "directory": "small", "template": "{name}-{width}.{ext}"}]}
        """)
      for pipeline in ["Examples/pipelines/avatar-sizes.json", written] {
        let alone = setup.folder + "/alone-\(UUID().uuidString)"
        let queued = setup.folder + "/queued-\(UUID().uuidString)"
        let run = try await Runner.run(["run", pipeline, inputs, "-o", alone, "--quiet"])
        #expect(run.status == 0, "\(run.stderr)")
        let first = try await Runner.run(["run", pipeline, inputs, "-o", queued, "--queue", setup.url])
        #expect(first.status == 0 && first.stderr.contains("8 new, 8 run here"), "\(first.stderr)")
        let compared = try setup.sameFiles(alone, queued)
        #expect(compared.count >= 8 && compared.same)
        try FileManager.default.removeItem(atPath: queued)
        let again = try await Runner.run(["run", pipeline, inputs, "-o", queued, "--queue", setup.url])
        #expect(again.status == 0 && again.stderr.contains("0 new, 0 run here"), "\(again.stderr)")
        #expect(try setup.sameFiles(alone, queued).same)
      }
      // Every job done once: one claim and one completion each in the ledger.
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'done'") == [16])
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'claimed'") == [16])
    }
  }

  @Test("1,000 jobs, 3 workers, one killed with SIGKILL at 30 %: each job done once, outputs as run's, only its jobs redone")
  func killedWorker() async throws {
    try await Setup.with { setup in
      let inputs = try setup.inputs(1_000)
      let pipeline = try setup.pipeline("fit48", Self.fit48)
      let reference = setup.folder + "/reference"
      let run = try await Runner.run(["run", pipeline, inputs, "-o", reference, "--quiet", "--jobs", "2"])
      #expect(run.status == 0, "\(run.stderr)")
      let enqueued = try await Runner.run(["enqueue", pipeline, inputs, "--queue", setup.url, "--batch", "thousand"])
      #expect(enqueued.status == 0 && enqueued.stderr.contains("1000 new jobs"), "\(enqueued.stderr)")
      let arguments = ["worker", "--queue", setup.url, "--jobs", "2", "--lease", "5", "--exit-when-idle"]
      let workers = try (0..<3).map { _ in try StreamingChild.start(arguments) }
      let victim = workers[0].process.processIdentifier
      // Kill the first worker once 30 % of the batch is done, noting what it held.
      while (try await setup.numbers("SELECT count(*) FROM darkroom_jobs WHERE state = 'done'").first ?? 0) < 300 {
        try await Task.sleep(for: .milliseconds(20))  // polling the database's count, not waiting for time
      }
      kill(victim, SIGKILL)
      let killed = await workers[0].finish()
      #expect(killed.status == SIGKILL || killed.status == 128 + SIGKILL || killed.status != 0)
      for worker in workers.dropFirst() {
        let ended = await worker.finish()
        #expect(ended.status == 0, "\(ended.stderr)")
      }
      let status = try await Runner.run(["batch", "status", "thousand", "--queue", setup.url])
      #expect(status.status == 0 && status.stdout.contains("done 1000, dead 0"), "\(status.stdout)\(status.stderr)")
      let output = setup.folder + "/downloaded"
      let results = try await Runner.run(["batch", "results", "thousand", "--queue", setup.url, "-o", output])
      #expect(results.status == 0 && results.stderr.contains("wrote 1000 files"), "\(results.stderr)")
      let compared = try setup.sameFiles(reference, output)
      #expect(compared.count == 1_000 && compared.same)
      // Exactly one completion per job; only the killed worker's jobs were claimed twice. The
      // ledger names each claim's worker: every claim that was followed by another is the killed
      // worker's. (Asking after the kill which jobs it held raced with their leases running out on
      // a loaded machine: by then another worker could hold them.)
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'done'") == [1_000])
      #expect(try await setup.numbers("SELECT count(DISTINCT job_id) FROM darkroom_ledger WHERE event = 'done'") == [1_000])
      let redone = try await setup.numbers(
        "SELECT job_id FROM darkroom_ledger WHERE event = 'claimed' GROUP BY job_id HAVING count(*) > 1 ORDER BY job_id")
      let takenFromOthers = try await setup.numbers(
        """
        SELECT DISTINCT earlier.job_id FROM darkroom_ledger earlier JOIN darkroom_ledger later
          ON later.job_id = earlier.job_id AND later.event = 'claimed' AND later.id > earlier.id
        WHERE earlier.event = 'claimed' AND earlier.worker NOT LIKE \("%:\(victim)")
        """)
      #expect(
        redone.count <= 4 && takenFromOthers.isEmpty, "redone \(redone), of which not the killed worker's: \(takenFromOthers)")
    }
  }

  @Test("PostgreSQL restarted in the middle of a batch: the worker waits, reconnects, and nothing is lost or done twice")
  func databaseRestart() async throws {
    try await Setup.with(ownServer: true) { setup in
      let inputs = try setup.inputs(300)
      let pipeline = try setup.pipeline("fit48", Self.fit48)
      let enqueued = try await Runner.run(["enqueue", pipeline, inputs, "--queue", setup.url, "--batch", "restart"])
      #expect(enqueued.status == 0, "\(enqueued.stderr)")
      let worker = try StreamingChild.start(["worker", "--queue", setup.url, "--jobs", "2", "--exit-when-idle"])
      while (try await setup.numbers("SELECT count(*) FROM darkroom_jobs WHERE state = 'done'").first ?? 0) < 50 {
        try await Task.sleep(for: .milliseconds(20))  // polling the database's count
      }
      // The worker is held still while the database stops, so that the batch cannot end before
      // the outage (on a loaded machine, stopping a server can take longer than the batch).
      kill(worker.process.processIdentifier, SIGSTOP)
      try await setup.server.restart {
        kill(worker.process.processIdentifier, SIGCONT)
        // While the database is down the worker says it cannot claim, and keeps going.
        await worker.waitForErrorLine { $0.contains("cannot claim jobs") }
      }
      let ended = await worker.finish()
      #expect(ended.status == 0, "\(ended.stderr)")
      #expect(ended.stderr.contains("the queue answers again"), "\(ended.stderr)")
      let status = try await Runner.run(["batch", "status", "restart", "--queue", setup.url])
      #expect(status.stdout.contains("done 300, dead 0"), "\(status.stdout)\(status.stderr)")
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'done'") == [300])
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_results") == [300])
      let output = setup.folder + "/downloaded"
      let results = try await Runner.run(["batch", "results", "restart", "--queue", setup.url, "-o", output])
      #expect(results.status == 0 && results.stderr.contains("wrote 300 files"), "\(results.stderr)")
    }
  }
}
