import Darkroom
import DarkroomCore
import DarkroomHTTPTestServer
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Outputs of a batch: distinct inputs never overwrite each other, a cache hit keeps its input's
/// name, and an input given twice runs once.
@Suite("Runner outputs", .serialized, .timeLimit(.minutes(3)))
struct RunnerOutputTests {
  /// A folder of inputs whose names collide once extensions are dropped, folders flattened and
  /// characters cleaned; each file has its own content (its own size after resizing).
  func collidingInputs() throws -> (folder: String, files: [String]) {
    let folder = try Runner.temporaryDirectory()
    try FileManager.default.createDirectory(atPath: folder + "/in/sub", withIntermediateDirectories: true)
    let images = Runner.package.path + "/Examples/images/"
    let files = [
      ("a.jpg", "dunes.jpg"), ("a.png", "rings.png"), ("A.webp", "checker.webp"), ("sub/a.jpg", "portrait-rotated.jpg"),
      ("a b.jpg", "portrait-rotated.jpg"), ("a_b.jpg", "dunes.jpg"), ("a-jpg.png", "rings.png"),
    ]
    for (name, original) in files {
      try FileManager.default.copyItem(atPath: images + original, toPath: folder + "/in/" + name)
    }
    return (folder, files.map(\.0))
  }

  @Test("every distinct input gets its own output, whatever its name; the run says done N for N files written")
  func distinctInputsDistinctOutputs() async throws {
    let (folder, files) = try collidingInputs()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    for pipeline in ["Examples/pipelines/thumbnail.json", "Examples/pipelines/avatar-sizes.json"] {
      let output = folder + "/out-" + (pipeline as NSString).lastPathComponent
      let run = try await Runner.run(["run", pipeline, folder + "/in", "--recursive", "--output", output])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(run.stderr.contains("done \(files.count), failed 0"), "\(run.stderr)")
      let written = try FileManager.default.contentsOfDirectory(atPath: output)
      let perInput = pipeline.hasSuffix("avatar-sizes.json") ? 3 : 1
      #expect(written.count == files.count * perInput, "\(written.sorted())")
      #expect(Set(written.map { $0.lowercased() }).count == written.count, "no two names differ only by case")
    }
  }

  @Test("a template that maps two inputs onto one file fails the second, counted in the summary; the first output stays")
  func templateCollisionFails() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/fixed.json"
    try Data(
      #"{"version": 1, "name": "fixed", "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40}, {"stage": "encode", "format": "png"}, {"stage": "write", "template": "one.{ext}"}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let run = try await Runner.run([
      "run", pipeline, "Examples/images/dunes.jpg", "Examples/images/rings.png", "--output", folder + "/out", "--jobs", "1",
    ])
    #expect(run.status == 1)
    #expect(run.stderr.contains("done 1, failed 1"), "\(run.stderr)")
    #expect(run.stderr.contains("writeFailed") && run.stderr.contains("was already written in this run for"), "\(run.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/out") == ["one.png"])
  }

  @Test("an input given twice is run once")
  func repeatedInputRunsOnce() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let run = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", "Examples/images/dunes.jpg", "Examples/images",
      Runner.package.path + "/Examples/images/dunes.jpg", "--output", folder, "--events", "jsonl",
    ])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("done 4, failed 0") && run.stderr.contains("2 inputs were given more than once"), "\(run.stderr)")
    let started = run.stdout.split(separator: "\n").filter { $0.contains("\"event\":\"started\"") }
    #expect(started.count == 4)
  }

  @Test("a cache hit writes its output under its own input's name, however unusual, never under another's")
  func cacheHitsKeepNames() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    try FileManager.default.createDirectory(atPath: folder + "/in", withIntermediateDirectories: true)
    let names = ["weird name #1.jpg", "ümlaut.png", "a%20b.jpg", "file:x.jpg", "http:y.jpg", "x\u{1F}y.jpg", ".hidden-not.jpg"]
    let images = [
      "dunes.jpg", "rings.png", "portrait-rotated.jpg", "dunes.jpg", "rings.png", "portrait-rotated.jpg", "dunes.jpg",
    ]
    for (name, image) in zip(names, images) {
      try FileManager.default.copyItem(atPath: Runner.package.path + "/Examples/images/" + image, toPath: folder + "/in/" + name)
    }
    let inputs = names.map { folder + "/in/" + $0 }
    func run(_ output: String) async throws -> [String: Data] {
      let result = try await Runner.run(
        ["run", "Examples/pipelines/cached-thumbnail.json"] + inputs + ["--output", output, "--cache-dir", folder + "/cache"])
      #expect(result.status == 0, "\(result.stderr)")
      var contents: [String: Data] = [:]
      for name in try FileManager.default.contentsOfDirectory(atPath: output) {
        contents[name] = try Data(contentsOf: URL(fileURLWithPath: output + "/" + name))
      }
      return contents
    }
    let first = try await run(folder + "/first")
    let second = try await run(folder + "/second")  // every image from the disk cache
    #expect(first.count == names.count)
    #expect(first == second)
  }
}

extension RunnerOutputTests {
  @Test("a fetch-only mirror saves only images, under the extension of the format the bytes are, never one the server chose")
  func mirrorSavesOnlyImages() async throws {
    let jpeg = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/dunes.jpg"))
    let png = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/rings.png"))
    let server = try await TestHTTPServer.start(routes: [
      "/shell.php": .ok(body: Array(jpeg), contentType: "application/x-httpd-php"),
      "/photo.html": .ok(body: Array(png), contentType: "text/html"),
      "/page.jpg": .ok(body: Array("<html><script>alert(1)</script></html>".utf8), contentType: "image/jpeg"),
      "/vector.jpg": .ok(
        body: Array(#"<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>"#.utf8), contentType: "image/svg+xml"),
    ])
    defer { Task { try? await server.shutdown() } }
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/mirror.json"
    try Data(#"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 0}]}"#.utf8).write(
      to: URL(fileURLWithPath: pipeline))
    let urls = ["/shell.php", "/photo.html", "/page.jpg", "/vector.jpg"].map { server.url($0) }
    let run = try await Runner.run(["run", pipeline] + urls + ["--output", folder + "/out", "--jobs", "1"])
    #expect(run.status == 1)
    #expect(run.stderr.contains("done 2, failed 2"), "\(run.stderr)")
    #expect(run.stderr.contains("unsupportedFormat"), "\(run.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/out").sorted() == ["photo.png", "shell.jpg"])
  }
}

extension RunnerOutputTests {
  @Test("file names that are not UTF-8, or whose output name passes 255 bytes, fail with the right code and say why")
  func unusualFileNames() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let inputs = folder + "/in"
    try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
    let png = try Data(contentsOf: Runner.package.appendingPathComponent("Examples/images/rings.png"))
    // A name of raw bytes (Latin-1 "café.png"), made with open(2): Foundation cannot spell it.
    let raw: [UInt8] = Array((inputs + "/caf").utf8) + [0xE9] + Array(".png".utf8) + [0]
    let descriptor = raw.withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
    }
    try #require(descriptor >= 0)
    _ = png.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    // 250 bytes of name: the input fits, "-thumb.jpg" does not.
    let long = String(repeating: "é", count: 121) + "long"
    try png.write(to: URL(fileURLWithPath: inputs + "/" + long + ".png"))
    let fits = String(repeating: "n", count: 240)
    try png.write(to: URL(fileURLWithPath: inputs + "/" + fits + ".png"))
    let run = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", inputs, "--output", folder + "/out"])
    #expect(run.status == 1)
    #expect(run.stderr.contains("done 1, failed 2"), "\(run.stderr)")
    #expect(run.stderr.contains("invalidInput: the file name is not valid UTF-8"), "\(run.stderr)")
    #expect(run.stderr.contains("writeFailed") && run.stderr.contains("over the file system's limit of 255"), "\(run.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/out") == [fits + "-thumb.jpg"])
  }
}

extension RunnerOutputTests {
  @Test("cache purge finds a file's entries however its path is spelled (relative, absolute, with ..)")
  func purgeByAnySpelling() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = "Examples/pipelines/cached-thumbnail.json"
    let cache = ["--cache-dir", folder + "/cache"]
    let spellings = [
      "Examples/images/rings.png", Runner.package.path + "/Examples/images/rings.png", "./Examples/pipelines/../images/rings.png",
    ]
    for (index, spelling) in spellings.enumerated() {
      let run = try await Runner.run(["run", pipeline, "Examples/images/rings.png", "--output", folder + "/out"] + cache)
      #expect(run.status == 0, "\(run.stderr)")
      let purge = try await Runner.run(["cache", "purge", pipeline, spelling] + cache)
      #expect(purge.stdout.contains(": 1 entry removed"), "spelling \(index): \(purge.stdout)\(purge.stderr)")
    }
  }
}

extension RunnerOutputTests {
  @Test(
    "variants (or pipelines sharing a cache) that differ only in a background colour get their own colour, in flight and from the cache"
  )
  func backgroundIsPartOfTheWork() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // center pads the 300×300 box; the encode background flattens nothing here (no alpha).
    func variant(_ name: String, _ colour: String) -> String {
      #"{"name": "\#(name)", "stages": [{"stage": "resize", "width": 300, "height": 300, "mode": "center", "background": "\#(colour)"}, {"stage": "encode", "format": "png"}, {"stage": "cache", "store": "disk", "directory": "\#(folder)/cache"}]}"#
    }
    let pipeline = folder + "/colours.json"
    try Data(
      (#"{"version": 1, "name": "colours", "stages": [{"stage": "fetch"}, {"stage": "decode"}], "variants": ["#
        + variant("red", "#ff0000") + ", " + variant("green", "#00ff00") + "]}").utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    try TestImages.encoded(.png(), width: 100, height: 50).data.write(to: URL(fileURLWithPath: folder + "/small.png"))
    func corner(_ path: String) throws -> [UInt8] {
      let bytes = ImageBytes(try Data(contentsOf: URL(fileURLWithPath: path)))
      let decoded = try ImageDecoder(autoRotate: false).decode(FetchedData(source: ImageSource(path: path), bytes: bytes))
      return Array(try decoded.image.pixel(x: 0, y: 0).prefix(3))
    }
    for round in 0..<2 {  // the second round is answered by the cache
      let output = folder + "/out\(round)"
      let run = try await Runner.run(["run", pipeline, folder + "/small.png", "--output", output])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(try corner(output + "/small-red.png") == [255, 0, 0], "round \(round)")
      #expect(try corner(output + "/small-green.png") == [0, 255, 0], "round \(round)")
    }
  }
}

extension RunnerOutputTests {
  @Test("a name made unique with a digest never equals another input's own name")
  func madeNamesStayUnique() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let inputs = folder + "/in"
    try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
    let images = Runner.package.path + "/Examples/images/"
    try FileManager.default.copyItem(atPath: images + "dunes.jpg", toPath: inputs + "/a.jpg")
    try FileManager.default.copyItem(atPath: images + "dunes.jpg", toPath: inputs + "/a.JPG")
    // a.jpg and a.JPG differ only by case: both get a digest; a third input is named like one.
    let first = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", inputs, "--output", folder + "/probe"])
    #expect(first.status == 0, "\(first.stderr)")
    let made = try FileManager.default.contentsOfDirectory(atPath: folder + "/probe").sorted()
    let madeStem = try #require(made.first?.replacingOccurrences(of: "-thumb.jpg", with: ""))
    try FileManager.default.copyItem(atPath: images + "rings.png", toPath: inputs + "/" + madeStem + ".png")
    let run = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", inputs, "--output", folder + "/out"])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("done 3, failed 0"), "\(run.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/out").count == 3)
  }
}
