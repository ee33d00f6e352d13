import Darkroom
import DarkroomHTTP
import DarkroomHTTPTestServer
import Foundation
import Logging
import Testing

@Suite("presets, the fallback image and the configuration file")
struct PresetAndFallbackTests {
  static func preset(width: Int, format: String = "auto") -> String {
    #"{"version": 1, "stages": [{"stage": "decode"}, {"stage": "resize", "width": \#(width), "height": \#(width)}, {"stage": "encode", "format": "\#(format)"}]}"#
  }

  @Test("a preset URL is signed with HMAC-SHA256; an edited preset is reloaded; a broken edit keeps the last good one")
  func presets() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg")
    ])
    let folder = try ServedFixtures.folder()
    try Self.preset(width: 100).write(toFile: folder + "/thumb.json", atomically: true, encoding: .utf8)
    try #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "encode", "format": "png"}]}"#
      .write(toFile: folder + "/withfetch.json", atomically: true, encoding: .utf8)
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.allowUnsafe = false
    configuration.key = "preset key"
    configuration.presets = folder
    configuration.resultCache = false
    let running = try await RunningServer.start(configuration)
    let signer = ThumborSignature(key: "preset key", algorithm: .sha256)
    let path = "p/thumb/a.jpg"
    let url = "/" + signer.sign(path) + "/" + path
    let first = try await running.get(url, headers: ["Accept": "image/webp"])
    #expect(first.status == 200 && first.headers["content-type"] == "image/webp" && first.headers["vary"] == "Accept")
    #expect(try size(of: first.body) == (100, 75))
    #expect(try await running.get("/" + ThumborSignature(key: "preset key").sign(path) + "/" + path).status == 403)
    #expect(try await running.get("/unsafe/" + path).status == 403)
    let missing = "p/nothere/a.jpg"
    #expect(try await running.get("/" + signer.sign(missing) + "/" + missing).status == 400)
    let withFetch = "p/withfetch/a.jpg"
    #expect(try await running.get("/" + signer.sign(withFetch) + "/" + withFetch).status == 400)

    // A broken edit: the last good version stays, and the problem is reported.
    try "{\"version\": 1, \"stages\": [{\"stage\": \"decode\"}, {\"stage\": \"resize\", \"width\": -5}]}"
      .write(toFile: folder + "/thumb.json", atomically: true, encoding: .utf8)
    let problems = try #require(running.server.presets).reload()
    #expect(problems["thumb"] != nil)
    #expect(try size(of: try await running.get(url).body) == (100, 75))
    // A good edit is picked up by the watcher.
    try Self.preset(width: 40).write(toFile: folder + "/thumb.json", atomically: true, encoding: .utf8)
    #expect(try await eventually { (try? size(of: try await running.get(url).body)) ?? (0, 0) == (40, 30) })
    // A preset's own fallback image, for its failures.
    try Data(try ServedFixtures.png(width: 300, height: 300, alpha: false)).write(to: URL(fileURLWithPath: folder + "/oops.png"))
    try
      #"{"version": 1, "fallback": "oops.png", "stages": [{"stage": "decode"}, {"stage": "resize", "width": 60, "height": 60}, {"stage": "encode", "format": "png"}]}"#
      .write(toFile: folder + "/safe.json", atomically: true, encoding: .utf8)
    try #"{"version": 1, "fallback": "../oops.png", "stages": [{"stage": "decode"}, {"stage": "encode", "format": "png"}]}"#
      .write(toFile: folder + "/escape.json", atomically: true, encoding: .utf8)
    let reloaded = try #require(running.server.presets).reload()
    #expect(reloaded["escape"]?.message.contains("fallback") == true)
    let safe = "p/safe/missing.jpg"
    let fallback = try await running.get("/" + signer.sign(safe) + "/" + safe)
    #expect(fallback.status == 404 && fallback.headers["content-type"] == "image/png")
    #expect(try size(of: fallback.body) == (60, 60))
    try await running.stop()
    try await origin.shutdown()
    try? FileManager.default.removeItem(atPath: folder)
  }

  @Test("the fallback image is served at the requested size, with the failure's status")
  func fallback() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/broken.jpg": .ok(body: Array("garbage".utf8), contentType: "image/jpeg")
    ])
    let folder = try ServedFixtures.folder()
    try Data(try ServedFixtures.png(width: 400, height: 400, alpha: false)).write(
      to: URL(fileURLWithPath: folder + "/placeholder.png"))
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.fallbackImage = folder + "/placeholder.png"
    let running = try await RunningServer.start(configuration)
    let missing = try await running.get("/unsafe/fit-in/100x100/missing.jpg")
    #expect(missing.status == 404)
    #expect(missing.headers["content-type"] == "image/jpeg" && missing.headers["cache-control"] == "no-store")
    #expect(try size(of: missing.body) == (100, 100))
    let broken = try await running.get("/unsafe/fit-in/50x50/broken.jpg")
    #expect(broken.status == 415)
    #expect(try size(of: broken.body) == (50, 50))
    // Not for a URL that is wrong: that is the client's to fix.
    #expect(
      try await running.get("/unsafe/fit-in/50x50/filters:watermark(1)/broken.jpg").headers["content-type"]?.hasPrefix(
        "text/plain")
        == true)
    try await running.stop()
    var fixed = configuration
    fixed.fallbackStatus = 200
    let always200 = try await RunningServer.start(fixed)
    #expect(try await always200.get("/unsafe/fit-in/50x50/broken.jpg").status == 200)
    try await always200.stop()
    try await origin.shutdown()
    try? FileManager.default.removeItem(atPath: folder)
  }

  @Test("a configuration file is checked like a pipeline file: every problem with its JSON path")
  func configurationProblems() throws {
    let error = #expect(throws: PipelineError.self) {
      try ServerConfiguration.load(
        json: #"{"bind": "nowhere", "formats": ["webp", "bmp"], "quality": 0, "concurency": 2, "allowHosts": ["a b"]}"#)
    }
    let paths = Set(error?.issues.map(\.path) ?? [])
    #expect(paths.isSuperset(of: ["quality", "concurency"]), "\(error?.message ?? "")")
    #expect(error?.message.contains("did you mean \"concurrency\"") == true)
    let semantic = #expect(throws: PipelineError.self) {
      try ServerConfiguration.load(json: #"{"bind": "nowhere", "formats": ["webp", "bmp"], "allowHosts": ["a b"]}"#)
    }
    #expect(Set(semantic?.issues.map(\.path) ?? []) == ["bind", "formats[1]", "allowHosts[0]"])
    // A file may leave the key to a flag: that is checked on the whole.
    var keyless = try ServerConfiguration.load(json: #"{"origin": "https://images.example/"}"#)
    #expect(throws: PipelineError.self) { try keyless.validate() }
    keyless.allowUnsafe = true
    try keyless.validate()
    let good = try ServerConfiguration.load(json: #"{"origin": "https://images.example/", "key": "k", "concurrency": 3}"#)
    #expect(good.concurrency == 3 && good.bind == "127.0.0.1:8080" && good.formats == ["avif", "webp"])
    #expect(ServerConfiguration().maxAge == 86_400)
  }

  @Test("Docs/Server.md lists every setting")
  func settingsDocumented() throws {
    let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("Docs/Server.md")
    let text = try String(contentsOf: docs, encoding: .utf8)
    for spec in ServerConfiguration.specs { #expect(text.contains("| `\(spec.name)` |"), "\(spec.name)") }
  }
}

@Suite("presets naming files")
struct PresetFileTests {
  @Test("a preset's overlay watermark is read beneath the server's root: outside it, the preset does not load")
  func watermarkBeneathRoot() throws {
    let folder = try ServedFixtures.folder()
    let root = folder + "/root"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    try Data(try ServedFixtures.png(width: 8, height: 8, alpha: true)).write(to: URL(fileURLWithPath: root + "/mark.png"))
    try Data(try ServedFixtures.png(width: 8, height: 8, alpha: true)).write(to: URL(fileURLWithPath: folder + "/outside.png"))
    func preset(_ image: String) -> String {
      #"{"version": 1, "stages": [{"stage": "decode"}, {"stage": "overlay", "image": "\#(image)"}, {"stage": "encode", "format": "png"}]}"#
    }
    try preset(root + "/mark.png").write(toFile: folder + "/inside.json", atomically: true, encoding: .utf8)
    try preset(root + "/../outside.png").write(toFile: folder + "/outside.json", atomically: true, encoding: .utf8)
    let library = PresetLibrary(directory: folder, allowedRoot: root, logger: Logger(label: "presets"))
    let problems = library.reload()
    #expect(throws: Never.self) { _ = try library.preset(named: "inside") }
    #expect(problems["outside"]?.message.contains("outside the allowed root") == true, "\(problems)")
    #expect(throws: PipelineError.self) { _ = try library.preset(named: "outside") }
  }
}
