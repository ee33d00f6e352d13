import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Several `darkroom` processes on one disk cache, and one killed mid-write.
@Suite("Disk cache across processes", .serialized)
struct DiskCacheProcessTests {
  static let pipeline = """
    {"version": 1, "name": "shared-cache", "stages": [
      {"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 120},
      {"stage": "encode", "format": "png"}, {"stage": "cache", "store": "disk", "directory": "shared", "maxAge": 3600}]}
    """

  /// The same with an image table after the resize too (one process at a time: tables are locked).
  static let tablePipeline = """
    {"version": 1, "name": "table-and-disk", "stages": [
      {"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 120, "height": 120},
      {"stage": "cache", "store": "table", "width": 120, "height": 120, "maxCount": 64, "maxAge": 3600},
      {"stage": "encode", "format": "png"}, {"stage": "cache", "store": "disk", "directory": "shared", "maxAge": 3600}]}
    """

  /// A folder of distinct generated JPEGs and the pipeline file.
  func fixtures(count: Int, size: Int, pipeline text: String = pipeline) throws -> (
    root: String, images: String, pipeline: String
  ) {
    let root = try Runner.temporaryDirectory()
    let images = root + "/images"
    try FileManager.default.createDirectory(atPath: images, withIntermediateDirectories: true)
    for index in 0..<count {
      let bytes = try TestImages.encoded(.jpeg(quality: 90), width: size + index, height: size * 3 / 4, quadrants: index % 2 == 0)
      _ = try TestImages.write(bytes, named: "img\(index).jpg", in: images)
    }
    let pipeline = root + "/pipeline.json"
    try text.write(toFile: pipeline, atomically: true, encoding: .utf8)
    return (root, images, pipeline)
  }

  func launch(_ arguments: [String]) throws -> (Process, Pipe) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Runner.executable)
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = out
    try process.run()
    return (process, out)
  }

  func outputs(in directory: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
      files[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
    }
    return files
  }

  func cacheOutcomes(_ jsonl: String) throws -> [String] {
    try jsonl.split(separator: "\n").map { try JSONParser.parse(String($0)) }.filter { $0["event"] == "cache" }.compactMap {
      if case .string(let outcome)? = $0["outcome"] { outcome } else { nil }
    }
  }

  @Test("four processes fill one disk cache at once; a fifth is answered from it entirely")
  func concurrentProcesses() async throws {
    let (root, images, pipeline) = try fixtures(count: 12, size: 160)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let runs = try (0..<4).map { index in
      try launch(["run", pipeline, images, "-o", "\(root)/out\(index)", "--cache-dir", root, "--quiet", "--jobs", "2"])
    }
    for (process, out) in runs {
      let (status, text) = await offPool {
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
      }
      #expect(status == 0, "\(text)")
    }
    let reference = try outputs(in: "\(root)/out0")
    #expect(reference.count == 12)
    for index in 1..<4 { #expect(try outputs(in: "\(root)/out\(index)") == reference) }

    let last = try await Runner.run(["run", pipeline, images, "-o", "\(root)/out4", "--cache-dir", root, "--events", "jsonl"])
    #expect(last.status == 0, "\(last.stderr)")
    #expect(try cacheOutcomes(last.stdout) == Array(repeating: "hit", count: 12))
    #expect(!last.stdout.contains("\"stage\":\"decode"))
    #expect(try outputs(in: "\(root)/out4") == reference)
    let store = try DiskStore(directory: root + "/shared")
    #expect(try store.sweep() == 0)
  }

  @Test("a process killed with SIGKILL in the middle of writes never leaves a disk or table entry that is served wrong")
  func killedMidWrite() async throws {
    let (root, images, pipeline) = try fixtures(count: 40, size: 700, pipeline: Self.tablePipeline)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let (victim, out) = try launch([
      "run", pipeline, images, "-o", "\(root)/killed", "--cache-dir", root, "--events", "jsonl", "--jobs", "2",
    ])
    // Kill it once a few images are stored (two checkpoints each) and more are being written.
    let stored = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
      Thread {
        var buffer = Data()
        var count = 0
        while count < 10 {
          let chunk = out.fileHandleForReading.availableData
          if chunk.isEmpty { break }
          buffer.append(chunk)
          count = String(decoding: buffer, as: UTF8.self).components(separatedBy: "\"outcome\":\"stored\"").count - 1
        }
        kill(victim.processIdentifier, SIGKILL)
        continuation.resume(returning: count)
      }.start()
    }
    await offPool { victim.waitUntilExit() }
    #expect(victim.terminationReason == .uncaughtSignal)
    #expect(stored >= 10)

    // A clean run in a fresh cache gives the reference outputs.
    let clean = try await Runner.run(["run", pipeline, images, "-o", "\(root)/clean", "--cache-dir", root + "/fresh", "--quiet"])
    #expect(clean.status == 0, "\(clean.stderr)")
    // The survivor cache serves what it has, recomputes the rest, and every output matches.
    let resumed = try await Runner.run([
      "run", pipeline, images, "-o", "\(root)/resumed", "--cache-dir", root, "--events", "jsonl",
    ])
    #expect(resumed.status == 0, "\(resumed.stderr)")
    let outcomes = try cacheOutcomes(resumed.stdout)
    #expect(outcomes.filter { $0 == "hit" }.count >= 5)
    #expect(!outcomes.contains("storeFailed"))
    #expect(try outputs(in: "\(root)/resumed") == outputs(in: "\(root)/clean"))
    let store = try DiskStore(directory: root + "/shared")
    _ = try store.sweep()
    #expect(try await store.statistics().entries == 40)
  }

  @Test("darkroom cache stats, purge, clear and sweep work on the stores a pipeline file names")
  func cacheCommand() async throws {
    let (root, images, pipeline) = try fixtures(count: 3, size: 120)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let run = try await Runner.run(["run", pipeline, images, "-o", root + "/out", "--cache-dir", root, "--quiet"])
    #expect(run.status == 0)
    func entries() async throws -> Int {
      let stats = try await Runner.run(["cache", "stats", pipeline, "--cache-dir", root, "--json"])
      #expect(stats.status == 0, "\(stats.stderr)")
      guard case .array(let stores)? = try? JSONParser.parse(stats.stdout), case .number(let count, _)? = stores.first?["entries"]
      else {
        Issue.record("unexpected stats: \(stats.stdout)")
        return -1
      }
      return Int(count)
    }
    #expect(try await entries() == 3)
    let human = try await Runner.run(["cache", "stats", pipeline, "--cache-dir", root])
    #expect(human.stdout.contains("disk in \(root)/shared: 3 entries"))
    let purge = try await Runner.run(["cache", "purge", pipeline, "--cache-dir", root, images + "/img0.jpg"])
    #expect(purge.stdout.contains("1 entry removed"), "\(purge.stdout)\(purge.stderr)")
    #expect(try await entries() == 2)
    let sweep = try await Runner.run(["cache", "sweep", pipeline, "--cache-dir", root])
    #expect(sweep.stdout.contains("0 stray files removed"))
    let clear = try await Runner.run(["cache", "clear", pipeline, "--cache-dir", root, "--store", "disk"])
    #expect(clear.stdout.contains("disk: 2 entries removed"))
    #expect(try await entries() == 0)
    let none = try await Runner.run(["cache", "stats", pipeline, "--cache-dir", root, "--store", "table"])
    #expect(none.status != 0 && none.stderr.contains("no cache stage with a table store"))
  }

  @Test("cache stats on a store never made says so and makes nothing; cache clear on a terminal asks, or takes --yes")
  func cacheCommandAsksAndMakesNothing() async throws {
    let (root, images, pipeline) = try fixtures(count: 2, size: 80)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let empty = root + "/never"
    let stats = try await Runner.run(["cache", "stats", pipeline, "--cache-dir", empty])
    #expect(stats.status == 1 && stats.stderr.contains("there is no disk store at \(empty)/shared"), "\(stats.stderr)")
    #expect(!FileManager.default.fileExists(atPath: empty))
    #expect(try await Runner.run(["run", pipeline, images, "-o", root + "/out", "--cache-dir", root, "--quiet"]).status == 0)
    // On a terminal (script(1) gives the command one), "n" keeps everything.
    let command = ([Runner.executable, "cache", "clear", pipeline, "--cache-dir", root]).map { "'\($0)'" }.joined(separator: " ")
    let declined = try await Runner.capture(
      executable: "/bin/sh", arguments: ["-c", "echo n | script -qec \"\(command)\" /dev/null"])
    #expect(
      declined.status == 1 && declined.stdout.contains("Remove 2 entries of disk") && declined.stdout.contains("nothing removed"),
      "\(declined.stdout)")
    let accepted = try await Runner.capture(
      executable: "/bin/sh", arguments: ["-c", "echo y | script -qec \"\(command)\" /dev/null"])
    #expect(accepted.status == 0 && accepted.stdout.contains("disk: 2 entries removed"), "\(accepted.stdout)")
    // --yes, or no terminal (a script), does not ask.
    #expect(try await Runner.run(["run", pipeline, images, "-o", root + "/out2", "--cache-dir", root, "--quiet"]).status == 0)
    let yes = try await Runner.capture(
      executable: "/bin/sh", arguments: ["-c", "script -qec \"\(command) --yes\" /dev/null < /dev/null"])
    #expect(yes.status == 0 && !yes.stdout.contains("Remove") && yes.stdout.contains("entries removed"), "\(yes.stdout)")
  }

  @Test(
    "a run over a cache whose entries are FIFOs or symlinks and whose index names files outside finishes at once, with the same outputs",
    .timeLimit(.minutes(3)))
  func hostileCacheRun() async throws {
    let (root, images, pipeline) = try fixtures(count: 4, size: 100)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let first = try await Runner.run(["run", pipeline, images, "-o", root + "/first", "--cache-dir", root, "--quiet"])
    #expect(first.status == 0, "\(first.stderr)")
    let canary = root + "/canary"
    try Data("canary".utf8).write(to: URL(fileURLWithPath: canary))
    let entries = (FileManager.default.subpaths(atPath: root + "/shared/entries") ?? []).filter { $0.count == 67 }.sorted()
    #expect(entries.count == 4)
    for (index, entry) in entries.enumerated() {
      let path = root + "/shared/entries/" + entry
      unlink(path)
      #expect(index == 3 ? symlink(canary, path) == 0 : mkfifo(path, 0o644) == 0)
    }
    // The index's file column points outside the store (the sqlite3 tool, as an attacker would).
    let sqlite = Process()
    sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    sqlite.arguments = [root + "/shared/index.sqlite", "UPDATE entries SET file = '../canary'"]
    try sqlite.run()
    sqlite.waitUntilExit()
    #expect(sqlite.terminationStatus == 0)

    let clock = ContinuousClock()
    let start = clock.now
    let second = try await Runner.run(["run", pipeline, images, "-o", root + "/second", "--cache-dir", root, "--events", "jsonl"])
    #expect(second.status == 0, "\(second.stderr)")
    #expect(clock.now - start < .seconds(20))
    #expect(try cacheOutcomes(second.stdout).filter { $0 == "hit" }.isEmpty)
    #expect(try outputs(in: root + "/first") == (try outputs(in: root + "/second")))
    #expect((try? String(contentsOfFile: canary, encoding: .utf8)) == "canary")
    let clear = try await Runner.run(["cache", "clear", pipeline, "--cache-dir", root])
    #expect(clear.status == 0, "\(clear.stderr)")
    #expect((try? String(contentsOfFile: canary, encoding: .utf8)) == "canary")
  }
}
