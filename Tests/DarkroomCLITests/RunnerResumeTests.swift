import DarkroomHTTPTestServer
import Foundation
import Testing

/// `--skip-existing`, `--dry-run` and the progress bar, on real files through the built runner.
@Suite("Runner resume and dry run", .serialized, .timeLimit(.minutes(5)))
struct RunnerResumeTests {
  func modified(_ path: String) throws -> Date {
    try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date ?? .distantPast
  }

  func setModified(_ path: String, _ date: Date) throws {
    try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: path)
  }

  @Test("--skip-existing runs only inputs whose outputs are missing or older; the summary counts the skipped")
  func skipExisting() async throws {
    let folder = try ExampleInputs.folder([("a.jpg", "dunes.jpg"), ("b.png", "rings.png"), ("c.webp", "checker.webp")])
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let arguments = ["run", "Examples/pipelines/thumbnail.json", folder + "/in", "--output", folder + "/out", "--jobs", "1"]
    let first = try await Runner.run(arguments)
    #expect(first.status == 0 && first.stderr.contains("done 3, failed 0"), "\(first.stderr)")
    #expect(!first.stderr.contains("skipped"), "\(first.stderr)")
    let old = Date(timeIntervalSinceNow: -3_600)
    for name in ["a", "b", "c"] { try setModified(folder + "/out/\(name)-thumb.jpg", old) }
    for name in ["a.jpg", "b.png", "c.webp"] { try setModified(folder + "/in/" + name, old.addingTimeInterval(-60)) }

    let again = try await Runner.run(arguments + ["--skip-existing"])
    #expect(again.status == 0 && again.stderr.contains("done 0, failed 0"), "\(again.stderr)")
    #expect(again.stderr.contains("skipped 3 existing"), "\(again.stderr)")
    #expect(abs(try modified(folder + "/out/a-thumb.jpg").timeIntervalSince(old)) < 1, "a skipped output is not written again")

    // An input changed after its output, and an output deleted: those two are made again.
    try setModified(folder + "/in/a.jpg", Date())
    try FileManager.default.removeItem(atPath: folder + "/out/c-thumb.jpg")
    let resumed = try await Runner.run(arguments + ["--skip-existing"])
    #expect(resumed.status == 0 && resumed.stderr.contains("done 2, failed 0"), "\(resumed.stderr)")
    #expect(resumed.stderr.contains("skipped 1 existing"), "\(resumed.stderr)")
    #expect(try modified(folder + "/out/a-thumb.jpg").timeIntervalSince(old) > 60)
    #expect(abs(try modified(folder + "/out/b-thumb.jpg").timeIntervalSince(old)) < 1)
    #expect(FileManager.default.fileExists(atPath: folder + "/out/c-thumb.jpg"))
  }

  @Test("--skip-existing with variants needs every variant's output; a {width} template cannot be checked, so it runs")
  func skipExistingVariantsAndSizes() async throws {
    let folder = try ExampleInputs.folder([("a.jpg", "dunes.jpg"), ("b.png", "rings.png")])
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let variants = ["run", "Examples/pipelines/avatar-sizes.json", folder + "/in", "--output", folder + "/out", "--jobs", "1"]
    let first = try await Runner.run(variants)
    #expect(first.status == 0 && first.stderr.contains("done 2, failed 0"), "\(first.stderr)")
    try FileManager.default.removeItem(atPath: folder + "/out/b-128.webp")
    let again = try await Runner.run(variants + ["--skip-existing"])
    #expect(again.stderr.contains("done 1, failed 0") && again.stderr.contains("skipped 1 existing"), "\(again.stderr)")
    #expect(FileManager.default.fileExists(atPath: folder + "/out/b-128.webp"))

    let sized = folder + "/sized.json"
    try ExampleInputs.pipeline(
      #"{"version": 1, "name": "sized", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40}, {"stage": "encode", "format": "png"}, {"stage": "write", "template": "{name}-{width}.{ext}"}]}"#,
      at: sized)
    let sizedArguments = ["run", sized, folder + "/in", "--output", folder + "/sized", "--jobs", "1"]
    let made = try await Runner.run(sizedArguments)
    #expect(made.status == 0 && FileManager.default.fileExists(atPath: folder + "/sized/a-40.png"), "\(made.stderr)")
    let rerun = try await Runner.run(sizedArguments + ["--skip-existing"])
    #expect(rerun.stderr.contains("done 2, failed 0") && !rerun.stderr.contains("skipped 2"), "\(rerun.stderr)")
    #expect(rerun.stderr.contains("{name}-{width}.{ext}") && rerun.stderr.contains("its inputs are run"), "\(rerun.stderr)")
  }

  @Test("--skip-existing: a URL has no time, so an existing output of it counts as done")
  func skipExistingURL() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let webp = try Data(contentsOf: URL(fileURLWithPath: Runner.package.path + "/Examples/images/checker.webp"))
    let url = "data:image/webp;base64," + webp.base64EncodedString()
    let fetchOnly = folder + "/mirror.json"
    try ExampleInputs.pipeline(#"{"version": 1, "name": "mirror", "stages": [{"stage": "fetch"}]}"#, at: fetchOnly)
    let arguments = ["run", fetchOnly, url, "--output", folder + "/out"]
    let first = try await Runner.run(arguments)
    #expect(first.status == 0 && first.stderr.contains("done 1, failed 0"), "\(first.stderr)")
    let written = try FileManager.default.contentsOfDirectory(atPath: folder + "/out")
    #expect(written.count == 1 && written[0].hasSuffix(".webp"), "\(written)")
    let again = try await Runner.run(arguments + ["--skip-existing"])
    #expect(again.stderr.contains("done 0, failed 0") && again.stderr.contains("skipped 1 existing"), "\(again.stderr)")
  }

  @Test("--dry-run prints each output path (unknown parts as placeholders), contacts no server, writes nothing, exit 0")
  func dryRun() async throws {
    let server = try await TestHTTPServer.start(routes: ["/photo.jpg": .status(500)])
    let folder = try ExampleInputs.folder([("a.jpg", "dunes.jpg"), ("<b>\"x.png", "rings.png")])
    defer {
      try? FileManager.default.removeItem(atPath: folder)
    }
    let url = server.url("/photo.jpg")
    let variants = try await Runner.run([
      "run", "Examples/pipelines/avatar-sizes.json", folder + "/in", url, "--output", folder + "/out", "--dry-run",
    ])
    try await server.shutdown()
    #expect(variants.status == 0, "\(variants.stderr)")
    let lines = variants.stdout.split(separator: "\n").map(String.init)
    #expect(lines.count == 9, "\(variants.stdout)")
    for size in ["64", "128", "256"] {
      #expect(lines.contains("\(folder)/in/a.jpg -> \(folder)/out/a-\(size).webp"), "\(variants.stdout)")
      #expect(lines.contains("\(url) -> \(folder)/out/photo-\(size).webp"), "\(variants.stdout)")
    }
    #expect(
      lines.contains { $0.hasPrefix("\(folder)/in/<b>\"x.png -> ") && $0.hasSuffix("/out/_b__x-64.webp") }, "\(variants.stdout)")
    #expect(variants.stderr.contains("dry run: 3 inputs, 9 outputs"), "\(variants.stderr)")
    #expect(server.requestCount("/photo.jpg") == 0)
    #expect(!FileManager.default.fileExists(atPath: folder + "/out"))

    let sized = folder + "/sized.json"
    try ExampleInputs.pipeline(
      #"{"version": 1, "name": "sized", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40}, {"stage": "encode", "format": "auto"}, {"stage": "write", "template": "{name}-{width}.{ext}"}]}"#,
      at: sized)
    let unknown = try await Runner.run(["run", sized, folder + "/in/a.jpg", "--output", folder + "/out", "--dry-run"])
    #expect(unknown.status == 0 && unknown.stdout == "\(folder)/in/a.jpg -> \(folder)/out/a-{width}.{ext}\n", "\(unknown.stdout)")
    #expect(unknown.stderr.contains("1 named by the image's size"), "\(unknown.stderr)")
  }

  @Test("the progress bar on a terminal shows the rate and an ETA")
  func progressRateAndETA() async throws {
    let folder = try ExampleInputs.folder([("a.jpg", "dunes.jpg"), ("b.png", "rings.png")])
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // `script` runs the runner on a pseudo-terminal, so that its stderr is a terminal.
    let command = [Runner.executable, "run", "Examples/pipelines/thumbnail.json", folder + "/in", "--output", folder + "/out"]
      .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let run = try await Runner.capture(executable: "/usr/bin/script", arguments: ["-q", "-e", "-c", command, "/dev/null"])
    #expect(run.status == 0, "\(run.stdout)")
    let line = try #require(run.stdout.firstMatch(of: /2\/2  failed 0  ([\d.]+) images\/s  ETA (\d+:\d\d)/), "\(run.stdout)")
    #expect((Double(line.1) ?? 0) > 0 && line.2 == "0:00", "\(run.stdout)")
  }
}
