import DarkroomCore
import DarkroomHTTPTestServer
import DarkroomPostgres
import Foundation
import PostgresNIO
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The queue's commands under the inputs an attack found (each was a defect before its fix).
@Suite("darkroom worker and run --queue under attack")
struct QueueWorkerAttackTests {
  typealias Setup = QueueWorkerTests.Setup

  @Test("a second SIGTERM cancels the jobs in hand and gives them back: queued again, the attempt not counted")
  func secondSignalReleases() async throws {
    // Two origins: two transfers to one host would wait for each other's first answer (libcurl
    // waits to multiplex), and the second job would not start fetching.
    let first = try await TestHTTPServer.start(routes: ["/slow.jpg": .slowHeaders(delay: .seconds(600), then: .status(500))])
    let second = try await TestHTTPServer.start(routes: ["/slow.jpg": .slowHeaders(delay: .seconds(600), then: .status(500))])
    try await Setup.with { setup in
      let pipeline = try setup.pipeline(
        "fetch", #"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 0}]}"#)
      let enqueued = try await Runner.run([
        "enqueue", pipeline, first.url("/slow.jpg"), second.url("/slow.jpg"), "--queue", setup.url,
      ])
      #expect(enqueued.status == 0, "\(enqueued.stderr)")
      let worker = try StreamingChild.start(["worker", "--queue", setup.url, "--jobs", "2"])
      while first.requestCount("/slow.jpg") + second.requestCount("/slow.jpg") < 2 {
        try await Task.sleep(for: .milliseconds(20))  // polling the origins' counts: both jobs are fetching
      }
      // One signal at a time: a second SIGTERM sent before the first was handled merges with it.
      kill(worker.process.processIdentifier, SIGTERM)
      await worker.waitForErrorLine { $0.hasPrefix("stopping: no new images start") }
      kill(worker.process.processIdentifier, SIGTERM)
      let ended = await worker.finish()
      #expect(ended.status == 143 && ended.stderr.contains("given back 2"), "\(ended.stderr)")
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_jobs WHERE state = 'queued' AND attempts = 0") == [2])
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'released'") == [2])
    }
    try await first.shutdown()
    try await second.shutdown()
  }

  @Test("an output over --max-stored-bytes without a shared folder fails its job at once with tooLarge, said once")
  func resultTooLarge() async throws {
    try await Setup.with { setup in
      let inputs = try setup.inputs(1)
      let pipeline = try setup.pipeline("fit48", QueueWorkerTests.fit48)
      #expect(try await Runner.run(["enqueue", pipeline, inputs, "--queue", setup.url, "--batch", "big"]).status == 0)
      let worker = try await Runner.run([
        "worker", "--queue", setup.url, "--exit-when-idle", "--max-stored-bytes", "100", "--lease", "2",
      ])
      #expect(
        worker.status == 0 && worker.stderr.contains("tooLarge") && worker.stderr.contains("failed 1, lost 0"), "\(worker.stderr)"
      )
      let status = try await Runner.run(["batch", "status", "big", "--queue", setup.url])
      #expect(
        status.status == 1 && status.stdout.contains("dead 1") && status.stdout.contains("--shared-folder"), "\(status.stdout)")
      #expect(try await setup.numbers("SELECT count(*) FROM darkroom_ledger WHERE event = 'claimed'") == [1])
    }
  }

  @Test("run --queue keeps a file a write stage may not overwrite, and makes a new batch when an input changes")
  func overwriteAndChangedInputs() async throws {
    try await Setup.with { setup in
      let inputs = try setup.inputs(2)
      let keep = try setup.pipeline(
        "keep",
        """
        {"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 32},
          {"stage": "encode", "format": "png"}, {"stage": "write", "template": "{name}.{ext}", "overwrite": false}]}
        """)
      let output = setup.folder + "/out"
      try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
      try Data("mine".utf8).write(to: URL(fileURLWithPath: output + "/p0000-dunes.png"))
      let kept = try await Runner.run(["run", keep, inputs, "-o", output, "--queue", setup.url])
      #expect(kept.status == 1 && kept.stderr.contains("exists and overwrite is off"), "\(kept.stderr)")
      #expect(try Data(contentsOf: URL(fileURLWithPath: output + "/p0000-dunes.png")) == Data("mine".utf8))
      #expect(FileManager.default.fileExists(atPath: output + "/p0001-portrait-rotated.png"))
      // The same command after an input changed: a new batch, and the new image's output.
      let pipeline = try setup.pipeline("fit48", QueueWorkerTests.fit48)
      let first = try await Runner.run(["run", pipeline, inputs, "-o", setup.folder + "/a", "--queue", setup.url])
      #expect(first.status == 0, "\(first.stderr)")
      let changed = inputs + "/p0000-dunes.jpg"
      try FileManager.default.removeItem(atPath: changed)
      try FileManager.default.copyItem(atPath: Runner.package.path + "/Examples/images/portrait-rotated.jpg", toPath: changed)
      let second = try await Runner.run(["run", pipeline, inputs, "-o", setup.folder + "/b", "--queue", setup.url])
      #expect(second.status == 0 && second.stderr.contains("2 new"), "\(second.stderr)")
      let alone = try await Runner.run(["run", pipeline, inputs, "-o", setup.folder + "/c", "--quiet"])
      #expect(alone.status == 0)
      #expect(try setup.sameFiles(setup.folder + "/c", setup.folder + "/b").same)
    }
  }

  @Test("a queued pipeline may not write files on the workers; a source too long for the queue fails alone")
  func confinedPipelinesAndLongSources() async throws {
    try await Setup.with { setup in
      let inputs = try setup.inputs(1)
      let notes = try setup.pipeline(
        "notes",
        #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "notify", "name": "n", "jsonl": "/tmp/notes.jsonl"}]}"#)
      let refused = try await Runner.run(["enqueue", notes, inputs, "--queue", setup.url])
      #expect(refused.status == 2 && refused.stderr.contains("may not write notification files"), "\(refused.stderr)")
      let cached = try setup.pipeline(
        "cached", #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "cache", "store": "disk", "directory": "/tmp/x"}]}"#)
      let outside = try await Runner.run(["enqueue", cached, inputs, "--queue", setup.url])
      #expect(outside.status == 2 && outside.stderr.contains("inside the workers' --cache-dir"), "\(outside.stderr)")
      let list = setup.folder + "/list.txt"
      try ("data:image/png;base64," + String(repeating: "A", count: 9_000) + "\n").write(
        toFile: list, atomically: true, encoding: .utf8)
      let pipeline = try setup.pipeline("fit48", QueueWorkerTests.fit48)
      let run = try await Runner.run([
        "run", pipeline, inputs, "--input-list", list, "-o", setup.folder + "/out", "--queue", setup.url,
      ])
      #expect(run.status == 1 && run.stderr.contains("a queued source is at most 8192 bytes"), "\(run.stderr)")
      #expect(FileManager.default.fileExists(atPath: setup.folder + "/out/p0000-dunes.jpg"))
    }
  }
}
