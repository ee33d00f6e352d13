import DarkroomCore
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

/// Runs the built `darkroom` executable.
struct Runner {
  static var executable: String {
    if let configured = ProcessInfo.processInfo.environment["DARKROOM_BIN"] { return configured }
    // The test bundle sits next to the products of the same build.
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: folder.appendingPathComponent("darkroom").path), folder.path != "/" {
      folder.deleteLastPathComponent()
    }
    return folder.appendingPathComponent("darkroom").path
  }

  static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

  struct Result {
    var status: Int32
    var stdout: String
    var stderr: String
  }

  static func run(_ arguments: [String]) async throws -> Result {
    try await capture(executable: executable, arguments: arguments)
  }

  /// Runs a program from the package folder and collects its exit status and both outputs; the
  /// waiting is done on a thread of its own (``offPool(_:)``).
  static func capture(executable: String, arguments: [String], environment: [String: String] = [:]) async throws -> Result {
    try await offPool { try captureBlocking(executable: executable, arguments: arguments, environment: environment) }
  }

  static func captureBlocking(executable: String, arguments: [String], environment: [String: String]) throws -> Result {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if !environment.isEmpty {
      process.environment = ProcessInfo.processInfo.environment.merging(environment, uniquingKeysWith: { $1 })
    }
    process.currentDirectoryURL = package
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
    let errData = Protected<Data>(Data())
    let readerDone = DispatchSemaphore(value: 0)
    let reader = Thread {
      errData.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() }
      readerDone.signal()
    }
    reader.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    readerDone.wait()
    return Result(
      status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
      stderr: String(decoding: errData.value, as: UTF8.self))
  }

  static func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-e2e-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }
}

/// Runs blocking work (waiting for a child process, writing to its input) on a thread of its own,
/// so that a test never holds a thread of the cooperative pool while it waits: Swift Testing runs
/// tests on that pool, which has one thread a core, and two runner tests waiting on 2 cores
/// stalled every other test of the process until their operations timed out.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await onOwnThread(body)
}

/// ``offPool(_:)`` for work that cannot fail.
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    Thread.detachNewThread { continuation.resume(returning: body()) }
  }
}

@Suite("The darkroom runner", .serialized)
struct RunnerTests {
  @Test("the demo pipelines produce real thumbnails")
  func demo() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let thumbs = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", "Examples/images", "--output", output])
    #expect(thumbs.status == 0, "\(thumbs.stderr)")
    #expect(thumbs.stderr.contains("done 4, failed 0"))
    let avatars = try await Runner.run([
      "run", "Examples/pipelines/avatar.json", "Examples/images", "--output", output, "--events", "jsonl",
    ])
    #expect(avatars.status == 0, "\(avatars.stderr)")
    let files = try FileManager.default.contentsOfDirectory(atPath: output).sorted()
    #expect(files.filter { $0.hasSuffix("-thumb.jpg") }.count == 4)
    #expect(files.filter { $0.hasSuffix("-avatar.webp") }.count == 4)
    // The sideways portrait comes out upright (taller than wide), the landscape wider than tall.
    let events = try avatars.stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    let finished = events.filter { $0["event"] == "finished" }
    #expect(finished.count == 4)
    for event in finished {
      #expect(event["width"] == 256)
      #expect(event["height"] == 256)
      #expect(event["format"] == "webp")
      if case .string(let path)? = event["output"] {
        #expect(FileManager.default.fileExists(atPath: path))
      } else {
        Issue.record("no output path")
      }
    }
  }

  @Test("variants: every source written as {name}-{variant}.{ext}, decoded once for all its variants")
  func variants() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let run = try await Runner.run([
      "run", "Examples/pipelines/avatar-sizes.json", "Examples/images", "--output", output, "--events", "jsonl",
    ])
    #expect(run.status == 0, "\(run.stderr)")
    let files = try FileManager.default.contentsOfDirectory(atPath: output).sorted()
    for size in ["64", "128", "256"] { #expect(files.filter { $0.hasSuffix("-\(size).webp") }.count == 4) }
    let events = try run.stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    let decodes = events.filter { $0["event"] == "stageStarted" && $0["stage"] == "decode" }
    #expect(decodes.count == 12)  // every variant's run goes through the decode…
    #expect(decodes.filter { $0["joined"] == nil }.count == 4)  // …which ran once per source
    #expect(run.stderr.contains("avatarReady"))  // the notify stage's log sink
  }

  @Test("--stage-timeout bounds one kind of stage (fused stages by the sum of their parts) and is checked")
  func stageTimeouts() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let stuck = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/dunes.jpg", "--output", output,
      "--stage-timeout", "decode=0.000001", "--stage-timeout", "resize=0.000001",
    ])
    #expect(stuck.status == 1)
    #expect(stuck.stderr.contains("timedOut: stage \"decode+resize\" took longer than its"), "\(stuck.stderr)")
    let roomy = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/dunes.jpg", "--output", output, "--stage-timeout", "decode=30",
    ])
    #expect(roomy.status == 0, "\(roomy.stderr)")  // resize has no limit: the fused stage has none
    let wrong = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", "Examples/images", "--stage-timeout", "fetch"])
    #expect(wrong.status == 64 && wrong.stderr.contains("KIND=SECONDS"))
  }

  @Test("JSON Lines events: every operation has started, stages, willFinish and exactly one terminal event")
  func eventStream() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let bogus = (output as NSString).appendingPathComponent("not-an-image.jpg")
    try Data("plain text".utf8).write(to: URL(fileURLWithPath: bogus))
    let result = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/dunes.jpg", bogus, "--output", output, "--events", "jsonl",
    ])
    #expect(result.status == 1)
    let events = try result.stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    let byOperation = Dictionary(grouping: events) { $0["operation"]?.jsonText ?? "" }
    #expect(byOperation.count == 2)
    for (_, list) in byOperation {
      let names = list.compactMap { if case .string(let name)? = $0["event"] { name } else { nil } }
      #expect(names.first == "started")
      #expect(names.filter { ["finished", "failed", "cancelled"].contains($0) }.count == 1)
      #expect(["finished", "failed"].contains(names.last ?? ""))
      if names.last == "failed" {
        let failure = list.last
        #expect(failure?["error"]?["code"] == "unsupportedFormat")
        #expect(failure?["source"] == .string(bogus))
      } else {
        #expect(names.contains("willFinish"))
        #expect(list.contains { $0["stage"] == "decode+resize" })
      }
    }
    // No partial output for the failed input.
    #expect(!FileManager.default.fileExists(atPath: (output as NSString).appendingPathComponent("not-an-image-thumb.jpg")))
  }

  @Test("an invalid pipeline file exits 2 with a message that says where")
  func invalidPipeline() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let file = (folder as NSString).appendingPathComponent("bad.json")
    try Data(#"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "resize", "width": -5}]}"#.utf8).write(
      to: URL(fileURLWithPath: file))
    let run = try await Runner.run(["run", file, "Examples/images", "--output", folder])
    #expect(run.status == 2)
    #expect(run.stderr.contains("stages[1].width: expected a positive integer, got -5"))
    let validate = try await Runner.run(["validate", file, "Examples/pipelines/thumbnail.json"])
    #expect(validate.status == 2)
    #expect(validate.stdout.contains("ok: Examples/pipelines/thumbnail.json"))
    #expect(validate.stderr.contains("invalid: \(file): stages[1].width"))
    let usage = try await Runner.run(["run", file])
    #expect(usage.status == 64)
  }

  @Test("bad inputs fail with their codes; the exit status is 1; nothing partial is written")
  func badInputs() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let result = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "does/not/exist.jpg", "--root", "Examples", "Examples/images/dunes.jpg",
      "/etc/hostname",
      "--output", output,
    ])
    #expect(result.status == 1)
    #expect(result.stderr.contains("failed: does/not/exist.jpg: notFound"))
    #expect(result.stderr.contains("failed: /etc/hostname: accessDenied"))
    #expect(result.stderr.contains("done 1, failed 2"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: output) == ["dunes-thumb.jpg"])
  }

  @Test("a pipeline ending with encode gets written into --output and its events name the file")
  func encodeOnlyPipeline() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let file = (folder as NSString).appendingPathComponent("small.json")
    try Data(
      #"{"version": 1, "name": "small", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 50}, {"stage": "encode", "format": "png"}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: file))
    let output = (folder as NSString).appendingPathComponent("out")
    let result = try await Runner.run(["run", file, "Examples/images/checker.webp", "--output", output, "--events", "jsonl"])
    #expect(result.status == 0, "\(result.stderr)")
    let finished = try result.stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }.filter {
      $0["event"] == "finished"
    }
    #expect(finished.count == 1)
    let expected = (output as NSString).appendingPathComponent("checker.png")
    #expect(finished.first?["output"] == .string(expected))
    #expect(finished.first?["width"] == 50)
    #expect(FileManager.default.fileExists(atPath: expected))
  }

  @Test("a pipeline file's fetch root narrows --root and never widens it")
  func rootsNarrow() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let file = (folder as NSString).appendingPathComponent("wide.json")
    try Data(
      #"{"version": 1, "stages": [{"stage": "fetch", "root": "/"}, {"stage": "decode"}, {"stage": "encode", "format": "png"}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: file))
    let result = try await Runner.run([
      "run", file, "Examples/images/checker.webp", "--root", "Examples/pipelines", "--output", folder,
    ])
    #expect(result.status == 1)
    #expect(result.stderr.contains("accessDenied"))
  }

  @Test("http inputs from an input list, with the fetch bounded separately")
  func httpInputList() async throws {
    let jpeg = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/dunes.jpg"))
    let server = try await TestHTTPServer.start(routes: [
      "/dunes.jpg": .ok(body: Array(jpeg), contentType: "image/jpeg"), "/gone.jpg": .status(404),
    ])
    defer { Task { try? await server.shutdown() } }
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = (folder as NSString).appendingPathComponent("remote.json")
    try Data(
      #"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 0}, {"stage": "decode"}, {"stage": "resize", "width": 120}, {"stage": "encode", "format": "jpeg"}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let list = (folder as NSString).appendingPathComponent("inputs.txt")
    try Data("# remote images\n\(server.url("/dunes.jpg"))\n\n\(server.url("/gone.jpg"))\n".utf8).write(
      to: URL(fileURLWithPath: list))
    let output = (folder as NSString).appendingPathComponent("out")
    let result = try await Runner.run(["run", pipeline, "--input-list", list, "--fetch-concurrency", "1", "--output", output])
    #expect(result.status == 1)
    #expect(result.stderr.contains("httpStatus: the server answered 404"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: output) == ["dunes.jpg"])
    #expect(server.requestCount("/dunes.jpg") == 1)
  }

  @Test("stages and schema describe the registry")
  func stagesAndSchema() async throws {
    let stages = try await Runner.run(["stages"])
    #expect(stages.status == 0)
    for kind in ["fetch", "decode", "crop", "resize", "encode", "write"] { #expect(stages.stdout.contains("\(kind): ")) }
    let schema = try await Runner.run(["schema"])
    #expect(schema.status == 0)
    let parsed = try JSONParser.parse(schema.stdout)
    #expect(parsed["title"] == "Darkroom pipeline")
    let markdown = try await Runner.run(["stages", "--markdown"])
    let committed = try String(contentsOf: Runner.package.appendingPathComponent("Docs/Stages.md"), encoding: .utf8)
    #expect(markdown.stdout == committed, "Docs/Stages.md is stale: run make docs-stages")
  }
}
