import DarkroomCore
import DarkroomHTTPTestServer
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The runner's own boundaries: its command line, its output streams and the signals it gets.
@Suite("The runner at its boundaries", .serialized, .timeLimit(.minutes(3)))
struct RunnerBoundaryTests {
  @Test("every number option that is not a number in range is a usage error (64) naming the option, never a crash or a hang")
  func numberOptions() async throws {
    let output = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: output) }
    let bad: [(option: String, values: [String])] = [
      ("--timeout", ["nan", "inf", "1e300", "0", "0.0000001", "86401", "x"]),
      ("--stage-timeout", ["fetch=nan", "fetch=1e300", "fetch=inf", "fetch=0", "fetch=", "=3", "fetch"]),
      ("--jobs", ["0", "257", "60000", "99999999999999999999"]),
      ("--fetch-concurrency", ["0", "1025", "9223372036854775807"]),
      ("--vips-threads", ["0", "65", "100000"]),
    ]
    for (option, values) in bad {
      for value in values {
        let run = try await Runner.run([
          "run", "Examples/pipelines/thumbnail.json", "Examples/images", "--output", output, "\(option)=\(value)",
        ])
        #expect(run.status == 64, "\(option)=\(value): status \(run.status), \(run.stderr)")
        #expect(run.stderr.contains(option), "\(option)=\(value): \(run.stderr)")
      }
    }
    // A negative number after a space is the option's value, said to be out of range (it read as
    // another option, and the error was "Missing value").
    for (option, value, said) in [
      ("--jobs", "-3", "--jobs takes 1 to 256, got -3"), ("-j", "-1", "--jobs takes 1 to 256, got -1"),
      ("--timeout", "-1", "--timeout takes seconds"), ("--fetch-concurrency", "-8", "--fetch-concurrency"),
      ("--vips-threads", "-2", "--vips-threads"),
    ] {
      let run = try await Runner.run([
        "run", "Examples/pipelines/thumbnail.json", "Examples/images", "--output", output, option, value,
      ])
      #expect(
        run.status == 64 && run.stderr.contains(said) && !run.stderr.contains("Missing value"),
        "\(option) \(value): \(run.stderr)")
    }
    // A kind the pipeline does not have bounds nothing: refused, naming the pipeline's kinds.
    let misspelt = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images", "--output", output, "--stage-timeout", "decod=5",
    ])
    #expect(misspelt.status == 64 && misspelt.stderr.contains("decod, not a stage of this pipeline"), "\(misspelt.stderr)")
    // One part's limit bounds its fused stage (decode+resize had none when resize had none).
    let fused = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/dunes.jpg", "--output", output, "--stage-timeout",
      "decode=0.000001",
    ])
    #expect(fused.status == 1 && fused.stderr.contains(#"stage "decode+resize" took longer"#), "\(fused.stderr)")
    // The summary's rate counts the images made, not the failures.
    let mixed = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images", output + "/missing-1.jpg",
      output + "/missing-2.jpg",
      "--output", output + "/mixed",
    ])
    let summary = mixed.stderr.split(separator: "\n").last { $0.hasPrefix("done ") }.map(String.init) ?? ""
    if let match = summary.firstMatch(of: /done (\d+), failed (\d+), ([\d.]+) images\/s.* total ([\d.]+) s/),
      let rate = Double(match.3), let total = Double(match.4), total > 0
    {
      // rate × total is the images made (within the rounding of both), not those plus the failures.
      let made = Double(match.1) ?? 0
      #expect(made >= 2 && match.2 == "2", "\(summary)")
      #expect(abs(rate * total - made) < 1, "\(summary)")
    } else {
      Issue.record("no summary: \(mixed.stderr)")
    }
    // What a folder held that was not taken is counted, and listed with --verbose.
    let folder = output + "/mixed-folder"
    try FileManager.default.createDirectory(atPath: folder + "/.git", withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: "Examples/images/dunes.jpg", toPath: folder + "/dunes.jpg")
    try Data("notes".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
    try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/.hidden.jpg"))
    let counted = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", folder, "--output", output + "/c"])
    #expect(
      counted.status == 0
        && counted.stderr.contains("note: skipped 3 entries in the folders: 1 not an image, 2 hidden (--verbose lists them)"),
      "\(counted.stderr)")
    let listed = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", folder, "--output", output + "/l", "--verbose",
    ])
    #expect(
      listed.stderr.contains("skipped: \(folder)/notes.txt: not an image")
        && listed.stderr.contains("skipped: \(folder)/.git: hidden"), "\(listed.stderr)")
    let quiet = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", folder, "--output", output + "/q", "--quiet"])
    #expect(!quiet.stderr.contains("skipped"), "\(quiet.stderr)")
    let version = try await Runner.run(["--version"])
    #expect(
      version.status == 0 && version.stdout.hasPrefix("darkroom ") && version.stdout.contains("libvips 8."), "\(version.stdout)")
    // The edges of each range are accepted.
    let edges = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/rings.png", "--output", output, "--timeout=86400",
      "--stage-timeout=fetch=0.001", "--stage-timeout=decode=86400", "--jobs=256", "--fetch-concurrency=1024", "--vips-threads=1",
    ])
    #expect(edges.stderr.contains("done 1") || edges.stderr.contains("failed 1"), "\(edges.stderr)")
    #expect(edges.status == 0 || edges.status == 1, "\(edges.stderr)")
  }

  @Test("a closed or full stderr, or a stdout reader that goes away, never ends the batch or fails an image")
  func closedStreams() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    let cases: [(name: String, redirect: String, status: Int32)] = [
      ("stderr closed", "2>&-", 1),
      ("stderr on a full disk", "2>/dev/full", 1),
      ("stdout closed", ">&- --events jsonl", 1),
      ("stdout on a full disk", ">/dev/full --events jsonl", 1),
    ]
    for item in cases {
      let output = work + "/" + item.name.replacingOccurrences(of: " ", with: "-")
      // One input fails (it does not exist), so the runner writes a failure line to stderr.
      let script =
        "\"$DARKROOM\" run Examples/pipelines/thumbnail.json Examples/images \"$WORK/missing.jpg\" --output \"\(output)\" \(item.redirect)"
      let run = try await Shell.run(script, work: work)
      #expect(run.status == item.status, "\(item.name): status \(run.status), \(run.stderr)")
      let written = (try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []
      #expect(written.filter { $0.hasSuffix("-thumb.jpg") }.count == 4, "\(item.name): \(written)")
    }
    // `--events jsonl | head -1`: the reader leaves after one line; every image is still made.
    let output = work + "/head"
    let piped = try await Shell.run(
      "\"$DARKROOM\" run Examples/pipelines/thumbnail.json Examples/images --output \"\(output)\" --events jsonl | head -1; echo \"status ${PIPESTATUS[0]}\" >&2",
      work: work)
    #expect(piped.stderr.contains("status 0"), "\(piped.stderr)")
    #expect(piped.stdout.split(separator: "\n").count == 1)
    let written = (try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []
    #expect(written.filter { $0.hasSuffix("-thumb.jpg") }.count == 4, "\(written)")
  }

  @Test("control characters in file names are shown escaped, never sent raw to the terminal")
  func escapedNames() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    let name = "evil\u{1B}]0;pwned\u{07}\u{1B}[2J\nforged line.jpg"
    FileManager.default.createFile(atPath: work + "/" + name, contents: Data("not an image".utf8))
    let run = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", work + "/" + name, "--output", work + "/out"])
    #expect(run.status == 1)
    #expect(!run.stderr.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, "\(run.stderr.debugDescription)")
    #expect(run.stderr.contains("\\u{1b}]0;pwned"), "\(run.stderr.debugDescription)")
    #expect(!run.stderr.split(separator: "\n").contains { $0.hasPrefix("forged line") })
  }

  @Test(
    "SIGINT and SIGTERM: nothing new starts, what is in flight finishes, no temporary file is left, the summary counts what did not start"
  )
  func stopSignals() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    let inputs = work + "/in"
    try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
    let originals = ["dunes.jpg", "portrait-rotated.jpg", "rings.png"]
    for index in 0..<120 {
      let original = originals[index % originals.count]
      try FileManager.default.copyItem(
        atPath: Runner.package.path + "/Examples/images/" + original,
        toPath: inputs + "/\(index)." + (original as NSString).pathExtension)
    }
    for (signal, status, count) in [(SIGINT, Int32(130), 1), (SIGTERM, Int32(143), 1), (SIGINT, Int32(130), 2)] {
      let output = work + "/out-\(signal)-\(count)"
      let child = try StreamingChild.start([
        "run", "Examples/pipelines/thumbnail.json", inputs, "--output", output, "--events", "jsonl", "--jobs", "1",
      ])
      await child.waitForLine { $0.contains("\"event\":\"finished\"") }
      for _ in 0..<count { kill(child.process.processIdentifier, signal) }
      let result = await child.finish()
      #expect(result.status == status, "signal \(signal) ×\(count): \(result.stderr)")
      let written = (try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []
      #expect(!written.contains { $0.hasSuffix(".tmp") }, "\(written)")
      let summary = result.stderr.split(separator: "\n").last { $0.hasPrefix("done ") }.map(String.init) ?? ""
      #expect(summary.contains("not started"), "\(result.stderr)")
      // Every image counted done has its output; nothing beyond them was written.
      let done = summary.split(separator: ",").first.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
      #expect(written.filter { $0.hasSuffix("-thumb.jpg") }.count == done, "\(summary) \(written.count)")
      #expect(done >= 1 && done < 120, "\(summary)")
    }
  }
}

/// A shell script run with bash, with `$DARKROOM` and `$WORK` set, from the package folder.
enum Shell {
  static func run(_ script: String, work: String) async throws -> Runner.Result {
    try await Runner.capture(
      executable: "/bin/bash", arguments: ["-c", script], environment: ["DARKROOM": Runner.executable, "WORK": work])
  }
}

extension RunnerBoundaryTests {
  @Test("the time limit holds for a source with many variants: all of them end by it, not one after another")
  func variantsKeepTheTimeLimit() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // Each variant its own work (alike ones would share it): upscale, then encode slowly.
    let variants = (0..<PipelineDefinition.maxVariants).map {
      #"{"name": "v\#($0)", "stages": [{"stage": "resize", "width": \#(3000 + $0), "mode": "fit"}, {"stage": "encode", "format": "png", "compression": 9}]}"#
    }
    let pipeline = folder + "/many.json"
    try Data(
      (#"{"version": 1, "name": "many", "fusion": false, "stages": [{"stage": "fetch"}, {"stage": "decode"}], "variants": ["#
        + variants.joined(separator: ", ") + "]}").utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let clock = ContinuousClock()
    let started = clock.now
    let run = try await Runner.run([
      "run", pipeline, "Examples/images/dunes.jpg", "--output", folder + "/out", "--timeout", "0.5", "--jobs", "1",
    ])
    let elapsed = clock.now - started
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("timedOut"), "\(run.stderr)")
    // 64 variants one after another would take tens of seconds; the limit (+1 s of grace) holds.
    #expect(elapsed < .seconds(10), "\(elapsed)")
  }
}

extension RunnerBoundaryTests {
  @Test(
    "an input list's lines end at a line feed only: a name holding U+2028, U+0085, VT or FF stays one input; a NUL is refused")
  func inputListLines() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let png = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/rings.png"))
    let names = ["odd\u{2028}name.png", "odd\u{85}name2.png", "odd\u{0B}name3.png", "odd\u{0C}name4.png"]
    for name in names { try png.write(to: URL(fileURLWithPath: folder + "/" + name)) }
    // The pieces a split would make: a file that must never be read.
    try FileManager.default.createDirectory(atPath: folder + "/name.png", withIntermediateDirectories: true)
    let list = folder + "/list.txt"
    try Data((names.map { folder + "/" + $0 }.joined(separator: "\r\n") + "\n").utf8).write(to: URL(fileURLWithPath: list))
    let run = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "--input-list", list, "--output", folder + "/out",
    ])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("done 4, failed 0"), "\(run.stderr)")
    var withNUL = Data((folder + "/" + names[0]).utf8)
    withNUL.append(contentsOf: [0] + Array("/etc/passwd\n".utf8))
    try withNUL.write(to: URL(fileURLWithPath: list))
    let refused = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "--input-list", list, "--output", folder + "/out2",
    ])
    #expect(refused.status == 64 && refused.stderr.contains("NUL"), "\(refused.stderr)")
  }
}

extension RunnerBoundaryTests {
  @Test("writes stopped by a 1 ms time limit leave no file: the files written are those of the inputs reported done")
  func timedOutWritesLeaveNoFile() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    try FileManager.default.createDirectory(atPath: folder + "/in", withIntermediateDirectories: true)
    let png = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/rings.png"))
    for index in 0..<64 { try png.write(to: URL(fileURLWithPath: folder + "/in/i\(index).png")) }
    let run = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", folder + "/in", "--output", folder + "/out", "--stage-timeout", "write=0.001",
      "--jobs", "16",
    ])
    let done = run.stderr.firstMatch(of: /done (\d+)/).flatMap { Int($0.1) }
    let timedOut = run.stderr.split(separator: "\n").filter { $0.hasPrefix("failed: ") && $0.contains("timedOut") }
      .compactMap { $0.firstMatch(of: /\/(i\d+)\.png/).map { String($0.1) } }
    let files = (try? FileManager.default.contentsOfDirectory(atPath: folder + "/out")) ?? []
    #expect(
      done != nil && files.count == done, "\(files.count) files for \(String(describing: done)) done: \(run.stderr.suffix(400))")
    #expect(timedOut.allSatisfy { !files.contains($0 + "-thumb.jpg") }, "files of timed-out inputs: \(files)")
    #expect((done ?? 0) + timedOut.count == 64, "\(run.stderr.suffix(400))")
  }
}

extension RunnerBoundaryTests {
  @Test("a run out of file descriptors says so, not that the server could not be reached; what it saved is whole")
  func outOfDescriptors() async throws {
    let body = try [UInt8](Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/dunes.jpg")))
    // The requests that get a connection are held until 40 are there (never: the descriptors run
    // out first), then answered a second later.
    let server = try await TestHTTPServer.start(routes: [
      "/held": .gathered(count: 40, within: .seconds(1), then: .ok(body: body, contentType: "image/jpeg"))
    ])
    defer { Task { try? await server.shutdown() } }
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    try Data(#"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 0}]}"#.utf8).write(
      to: URL(fileURLWithPath: work + "/mirror.json"))
    try Data((0..<40).map { server.url("/held?n=\($0)") + "\n" }.joined().utf8).write(
      to: URL(fileURLWithPath: work + "/urls.txt"))
    let run = try await Shell.run(
      """
      ulimit -n 40
      "$DARKROOM" run "$WORK/mirror.json" --input-list "$WORK/urls.txt" --fetch-concurrency 40 --output "$WORK/out"
      """, work: work)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("(the process is out of file descriptors"), "\(run.stderr)")
    #expect(run.stderr.contains("Too many open files"), "\(run.stderr)")
    #expect(!run.stderr.contains("cannot connect to the server"), "\(run.stderr)")
    // The connections kept alive hold the descriptors a save needs: those fail with the same reason.
    let saved = (try? FileManager.default.contentsOfDirectory(atPath: work + "/out")) ?? []
    #expect(saved.count < 40, "\(saved)")
    for name in saved { #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: work + "/out/" + name))) == body, "\(name)") }
  }
}
