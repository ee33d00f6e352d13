import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

/// `--report`, `--metrics` and `--strict-notify`, through the built runner, headless Chromium and a
/// loopback webhook that stays down.
@Suite("Runner report and metrics", .serialized, .timeLimit(.minutes(8)))
struct RunnerReportTests {
  /// Copies of the example images under hostile names, a damaged file, and the folder.
  func hostileInputs() throws -> (folder: String, inputs: [String]) {
    let folder = try ExampleInputs.folder([
      ("<script>alert(1)<!--x.jpg", "dunes.jpg"), ("quote\"'&amp;.png", "rings.png"),
      ("line\u{2028}sep<!--.webp", "checker.webp"),
      ("plain.jpg", "portrait-rotated.jpg"),
    ])
    try Data("not a jpeg at all".utf8).write(to: URL(fileURLWithPath: folder + "/in/damaged.jpg"))
    return (folder, [folder + "/in", folder + "/</script><b>gone.jpg"])
  }

  @Test("--report: one self-contained page, a tile per output with its thumbnail, a row per failure, names escaped")
  func report() async throws {
    let (folder, inputs) = try hostileInputs()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let page = folder + "/report.html"
    let run = try await Runner.run(
      ["run", "Examples/pipelines/thumbnail.json"] + inputs + ["--output", folder + "/out", "--report", page, "--jobs", "2"])
    #expect(run.status == 1 && run.stderr.contains("done 4, failed 2"), "\(run.stderr)")
    let html = try String(contentsOfFile: page, encoding: .utf8)
    // Self-contained: nothing is fetched from anywhere.
    #expect(!html.contains("src=\"http") && !html.contains("href=\"http"))
    // The blob cannot end its script: no raw "</script>" or "<!--" from a name inside it.
    #expect(HeadlessChromium.count("</script>", in: html) == 2 && !html.contains("<!--"))
    #expect(!html.contains("\u{2028}"))

    let dom = try await HeadlessChromium.dom(page)
    #expect(HeadlessChromium.count("class=\"tile\"", in: dom) == 4, "\(dom.prefix(3_000))")
    #expect(HeadlessChromium.count("src=\"data:image/webp;base64,", in: dom) == 4)
    #expect(HeadlessChromium.count("<tr class=\"failure\">", in: dom) == 2)
    #expect(dom.contains("4 outputs") && dom.contains("page 1 of 1"))
    #expect(dom.contains("&lt;/script&gt;&lt;b&gt;gone.jpg") && !dom.contains("<b>"), "the failed name is text, not markup")
    #expect(dom.contains("corruptImage") || dom.contains("unsupportedFormat"), "\(dom.suffix(5_000))")
    #expect(dom.contains("notFound"))
    #expect(HeadlessChromium.count("<rect class=\"bar\"", in: dom) == 20)
    #expect(dom.contains("&quot;stage&quot;: &quot;resize&quot;") || dom.contains("\"stage\": \"resize\""))
    // Every tile says its output's size, format and bytes.
    #expect(HeadlessChromium.count(" · jpeg · ", in: dom) == 4, "\(dom.prefix(3_000))")
    #expect(dom.contains("300×200 · jpeg · "), "dunes.jpg (1200×800) fitted in 300×300: \(dom.prefix(3_000))")

    let shot = try await HeadlessChromium.screenshot(page, width: 1200, height: 900)
    #expect(HeadlessChromium.pngSize(shot).map { [$0.width, $0.height] } == [1200, 900])
    let shotPath = folder + "/shot.png"
    try shot.write(to: URL(fileURLWithPath: shotPath))
    try Darkroom.bootstrap()
    let decoded = try await Pipeline(name: "check") {
      Fetcher()
      ImageDecoder()
    }.run(ImageSource(path: shotPath)).value
    #expect(decoded.width == 1200 && decoded.height == 900)
  }

  @Test("--report over 1,001 outputs is paged: 200 tiles in the DOM, the total stated")
  func pagedReport() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // One tiny real image made by the runner, then 1,001 copies of it.
    let tiny = folder + "/tiny.json"
    try ExampleInputs.pipeline(
      #"{"version": 1, "name": "tiny", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 8, "height": 8, "mode": "fill"}, {"stage": "encode", "format": "png"}, {"stage": "write", "template": "seed.{ext}"}]}"#,
      at: tiny)
    let seed = try await Runner.run(["run", tiny, "Examples/images/rings.png", "--output", folder])
    #expect(seed.status == 0, "\(seed.stderr)")
    try FileManager.default.createDirectory(atPath: folder + "/in", withIntermediateDirectories: true)
    for index in 0..<1_001 { try FileManager.default.copyItem(atPath: folder + "/seed.png", toPath: folder + "/in/\(index).png") }
    let mirror = folder + "/mirror.json"
    try ExampleInputs.pipeline(#"{"version": 1, "name": "mirror", "stages": [{"stage": "fetch"}]}"#, at: mirror)
    let page = folder + "/report.html"
    let run = try await Runner.run(["run", mirror, folder + "/in", "--output", folder + "/out", "--report", page])
    #expect(run.status == 0 && run.stderr.contains("done 1001, failed 0"), "\(run.stderr)")
    let dom = try await HeadlessChromium.dom(page)
    #expect(HeadlessChromium.count("class=\"tile\"", in: dom) == 200)
    #expect(dom.contains("1001 outputs") && dom.contains("page 1 of 6"), "\(dom.prefix(2_000))")
    #expect(HeadlessChromium.count("src=\"data:image/webp;base64,", in: dom) == 200)
    // A save stage does not say what it saved: the size and format come from the file's header.
    #expect(HeadlessChromium.count("8×8 · png · ", in: dom) == 200, "\(dom.prefix(2_000))")
  }

  @Test("--metrics writes Prometheus text atomically: counts, a histogram of seconds per image, labels escaped")
  func metrics() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/p.json"
    try ExampleInputs.pipeline(
      #"{"version": 1, "name": "odd \"name\" \\ here", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 32}, {"stage": "encode", "format": "png"}]}"#,
      at: pipeline)
    let file = folder + "/darkroom.prom"
    let run = try await Runner.run([
      "run", pipeline, "Examples/images/dunes.jpg", "Examples/images/rings.png", folder + "/missing.jpg", "--output",
      folder + "/out",
      "--metrics", file,
    ])
    #expect(run.status == 1 && run.stderr.contains("done 2, failed 1"), "\(run.stderr)")
    let text = try String(contentsOfFile: file, encoding: .utf8)
    let label = #"pipeline="odd \"name\" \\ here""#
    #expect(text.contains("darkroom_run_images_total{\(label),outcome=\"done\"} 2"), "\(text)")
    #expect(text.contains("darkroom_run_images_total{\(label),outcome=\"failed\"} 1"), "\(text)")
    #expect(text.contains("darkroom_run_notifications_failed_total{\(label)} 0"), "\(text)")
    #expect(text.contains("# TYPE darkroom_run_image_duration_seconds histogram"))
    // The buckets only grow, and +Inf is the count (every input run is timed: two made, one failed).
    let buckets = text.split(separator: "\n").filter { $0.hasPrefix("darkroom_run_image_duration_seconds_bucket") }
      .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
    #expect(buckets.count == 14 && buckets == buckets.sorted() && buckets.last == 3, "\(text)")
    #expect(text.contains("darkroom_run_image_duration_seconds_count{\(label)} 3"), "\(text)")
    #expect(text.contains("darkroom_run_peak_resident_bytes{\(label)} "))
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix(".") }.isEmpty, "no temporary left")
  }

  @Test("a webhook that stays down: 'notifications failed N' in the summary; --strict-notify makes it exit 1")
  func failingWebhook() async throws {
    let server = try await TestHTTPServer.start(routes: ["/hook": .status(503)])
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/notified.json"
    try ExampleInputs.pipeline(
      """
      {"version": 1, "name": "notified", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 32},
       {"stage": "encode", "format": "png"},
       {"stage": "notify", "name": "ready", "webhook": {"url": "\(server.url("/hook"))", "retries": 0, "timeout": 5, "allowHosts": ["127.0.0.1"]}}]}
      """, at: pipeline)
    let arguments = ["run", pipeline, "Examples/images/dunes.jpg", "Examples/images/rings.png", "--output", folder + "/out"]
    let lenient = try await Runner.run(arguments)
    let posted = server.requestCount("/hook")
    #expect(lenient.status == 0 && lenient.stderr.contains("done 2, failed 0"), "\(lenient.stderr)")
    #expect(posted >= 2 && lenient.stderr.contains("notifications failed \(posted)"), "\(posted) \(lenient.stderr)")
    #expect(lenient.stderr.contains("503"), "the last error is shown: \(lenient.stderr)")
    let strict = try await Runner.run(arguments + ["--strict-notify", "--metrics", folder + "/m.prom"])
    #expect(strict.status == 1 && strict.stderr.contains("done 2, failed 0"), "\(strict.stderr)")
    let metrics = try String(contentsOfFile: folder + "/m.prom", encoding: .utf8)
    #expect(
      metrics.contains("darkroom_run_notifications_failed_total{pipeline=\"notified\"} \(server.requestCount("/hook") - posted)"))
    try await server.shutdown()
  }

  @Test(
    "--report and --metrics are checked before the run: a missing folder, a folder, one file twice (exit 64); a symlink is replaced"
  )
  func destinations() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let base = ["run", "Examples/pipelines/thumbnail.json", "Examples/images/rings.png", "--output", folder + "/out"]
    try FileManager.default.createSymbolicLink(atPath: folder + "/link", withDestinationPath: folder)
    for (extra, message) in [
      (["--report", folder + "/nowhere/r.html"], "does not exist"), (["--report", folder], "is a folder"),
      (["--metrics", folder + "/m", "--report", folder + "/./m"], "name one file"),
      // One file named from two places: by a relative path and an absolute one, and through a
      // symlinked folder (compared by the folder's identity, not by the text).
      (["--metrics", "Examples/m.prom", "--report", Runner.package.path + "/Examples/m.prom"], "name one file"),
      (["--metrics", folder + "/m", "--report", folder + "/link/m"], "name one file"),
      (["--report", folder + "/r.html", "--dry-run"], "--dry-run"),
      // Foundation's deletingLastPathComponent traps on these; the check takes them apart itself.
      (["--metrics", folder + "/none//é"], "does not exist"), (["--report", folder + "/none//..///r.html"], "does not exist"),
    ] {
      let run = try await Runner.run(base + extra)
      #expect(run.status == 64 && run.stderr.contains(message), "\(extra): \(run.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: folder + "/out"), "nothing ran")
    let target = folder + "/target.txt"
    try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
    try FileManager.default.createSymbolicLink(atPath: folder + "/link.html", withDestinationPath: target)
    let run = try await Runner.run(base + ["--report", folder + "/link.html"])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep", "the link's target is not written through")
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/link.html")) == nil)
  }
}
