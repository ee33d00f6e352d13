import Darkroom
import DarkroomHTTPTestServer
import DarkroomVipsTesting
import Foundation
import Testing

/// libvips is opened (dlopen) when a stage first needs pixels, and libcurl on the first HTTP
/// transfer, never before: a rerun whose images all come from the disk cache, `validate` and
/// `--help` load neither. The dynamic loader says what it loads when `LD_DEBUG=files` is set (glibc).
@Suite("libvips and libcurl opened on first use")
struct LazyLibraryTests {
  static let pipeline = """
    {"version": 1, "name": "lazy", "stages": [
      {"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40},
      {"stage": "encode", "format": "jpeg"}, {"stage": "cache", "store": "disk", "directory": "lazy"},
      {"stage": "write", "template": "{name}.jpg"}]}
    """

  /// Whether the loader's trace (stderr under LD_DEBUG=files) shows libvips being loaded.
  static func loadsVips(_ result: Runner.Result) -> Bool { loads("libvips.so", result) }

  /// Whether the trace shows libcurl (the OpenSSL build Darkroom uses) being loaded.
  static func loadsCurl(_ result: Runner.Result) -> Bool { loads("libcurl.so", result) }

  static func loads(_ library: String, _ result: Runner.Result) -> Bool {
    result.stderr.split(separator: "\n").contains { $0.contains("file=\(library)") }
  }

  func fixtures() throws -> (root: String, images: String, pipeline: String) {
    let root = try Runner.temporaryDirectory()
    let images = root + "/images"
    try FileManager.default.createDirectory(atPath: images, withIntermediateDirectories: true)
    for index in 0..<3 {
      let bytes = try TestImages.encoded(.jpeg(quality: 90), width: 64 + index, height: 48)
      _ = try TestImages.write(bytes, named: "img\(index).jpg", in: images)
    }
    let pipeline = root + "/pipeline.json"
    try Self.pipeline.write(toFile: pipeline, atomically: true, encoding: .utf8)
    return (root, images, pipeline)
  }

  /// The environment of a process that finds a file named `library` first on its library path,
  /// which dlopen finds and refuses ("file too short").
  func brokenLibrary(_ library: String, in root: String) throws -> [String: String] {
    let folder = root + "/lib"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    try Data("not a library".utf8).write(to: URL(fileURLWithPath: folder + "/" + library))
    return ["LD_LIBRARY_PATH": folder]
  }

  @Test("a cached rerun, validate and --help never load libvips; the first run and --version do")
  func cachedRerunSkipsVips() async throws {
    let (root, images, pipeline) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let trace = ["LD_DEBUG": "files"]
    let arguments = ["run", pipeline, images, "--cache-dir", root + "/cache", "--quiet", "--output"]
    let first = try await Runner.capture(
      executable: Runner.executable, arguments: arguments + [root + "/out1"], environment: trace)
    #expect(first.status == 0, "\(first.stderr.suffix(2000))")
    #expect(Self.loadsVips(first), "the first run decodes, so it must load libvips")
    let second = try await Runner.capture(
      executable: Runner.executable, arguments: arguments + [root + "/out2"], environment: trace)
    #expect(second.status == 0, "\(second.stderr.suffix(2000))")
    #expect(!Self.loadsVips(second), "every image of the rerun is a disk hit: libvips must stay closed")
    // Asking libvips for more threads does not open it either: the threads apply when it starts.
    let threads = try await Runner.capture(
      executable: Runner.executable, arguments: arguments + [root + "/out3", "--vips-threads", "2"], environment: trace)
    #expect(threads.status == 0 && !Self.loadsVips(threads), "\(threads.stderr.suffix(2000))")
    // (The first run loads libcurl with libvips: libvips' HDF5 dependency links it.)
    #expect(!Self.loadsCurl(second), "local files need no libcurl")
    for index in 0..<3 {
      let written = try Data(contentsOf: URL(fileURLWithPath: root + "/out2/img\(index).jpg"))
      let original = try Data(contentsOf: URL(fileURLWithPath: root + "/out1/img\(index).jpg"))
      #expect(written == original)
    }
    let validate = try await Runner.capture(executable: Runner.executable, arguments: ["validate", pipeline], environment: trace)
    #expect(validate.status == 0 && !Self.loadsVips(validate) && !Self.loadsCurl(validate), "\(validate.stdout)")
    let help = try await Runner.capture(executable: Runner.executable, arguments: ["run", "--help"], environment: trace)
    #expect(help.status == 0 && !Self.loadsVips(help) && !Self.loadsCurl(help))
    let version = try await Runner.capture(executable: Runner.executable, arguments: ["--version"], environment: trace)
    #expect(version.status == 0 && Self.loadsVips(version) && version.stdout.contains("libvips 8."), "\(version.stdout)")
    let subcommandVersion = try await Runner.run(["run", "--version"])
    #expect(subcommandVersion.status == 0 && subcommandVersion.stdout.contains("libvips 8."), "\(subcommandVersion.stdout)")
  }

  @Test("a run that ends before libvips' start begins exits as it should (the start does not race exit())")
  func earlyExitBeforeTheStart() async throws {
    let root = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    try FileManager.default.createDirectory(atPath: root + "/empty", withIntermediateDirectories: true)
    // "no inputs" ends the run at once while libvips starts on a pool thread: before the exit
    // hook existed from the start, about 1 run in 40 aborted in GLib (a start begun after exit()
    // ran the loader's own exit handlers runs GObject's constructor again).
    let statuses = try await withThrowingTaskGroup(of: [Int32].self) { group in
      for worker in 0..<2 {
        group.addTask {
          var seen: [Int32] = []
          for _ in 0..<75 {
            let result = try await Runner.run([
              "run", "Examples/pipelines/thumbnail.json", root + "/empty", "--output", root + "/out\(worker)",
            ])
            seen.append(result.status)
          }
          return seen
        }
      }
      return try await group.reduce(into: []) { $0 += $1 }
    }
    #expect(statuses.count == 150)
    #expect(statuses.allSatisfy { $0 == 1 }, "\(statuses.filter { $0 != 1 })")
  }

  @Test("an overlay's watermark needs libvips as the file loads: without it, exit 1 naming it, not an invalid pipeline")
  func overlayWithoutVips() async throws {
    let (root, images, _) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let mark = try TestImages.encoded(.png(), width: 16, height: 16, alpha: true)
    _ = try TestImages.write(mark, named: "mark.png", in: root)
    let pipeline = root + "/overlay.json"
    try Data(
      #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "overlay", "image": "\#(root)/mark.png"}, {"stage": "encode", "format": "jpeg"}, {"stage": "write", "template": "{name}.jpg"}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let broken = try brokenLibrary("libvips.so.42", in: root)
    let validate = try await Runner.capture(
      executable: Runner.executable, arguments: ["validate", pipeline], environment: broken)
    #expect(validate.status == 1, "\(validate.stderr)")
    #expect(validate.stderr.contains("cannot check") && validate.stderr.contains("libvips.so.42 could not be loaded"))
    let run = try await Runner.capture(
      executable: Runner.executable, arguments: ["run", pipeline, images, "--output", root + "/out"], environment: broken)
    #expect(run.status == 1 && !run.stderr.contains("invalid pipeline"), "\(run.stderr)")
    let working = try await Runner.run(["validate", pipeline])
    #expect(working.status == 0, "\(working.stderr)")
    let serve = try await Runner.capture(
      executable: Runner.executable, arguments: ["serve", "--bind", "127.0.0.1:0", "--allow-unsafe", "--root", images],
      environment: broken)
    #expect(serve.status == 1 && serve.stderr.contains("libvips.so.42 could not be loaded"), "\(serve.stderr)")
  }

  @Test("a libvips that cannot be loaded is a clear error, never a crash")
  func brokenLibraryIsAnError() async throws {
    let (root, images, pipeline) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let broken = try brokenLibrary("libvips.so.42", in: root)
    // Without a cache stage libvips starts before the first image: the run stops at once.
    let plain = try await Runner.capture(
      executable: Runner.executable, arguments: ["run", "Examples/pipelines/thumbnail.json", images, "--output", root + "/o1"],
      environment: broken)
    #expect(plain.status == 1, "\(plain.stderr)")
    #expect(plain.stderr.contains("libvips.so.42 could not be loaded"), "\(plain.stderr)")
    // With one, each image that needs pixels fails with the reason.
    let cached = try await Runner.capture(
      executable: Runner.executable,
      arguments: ["run", pipeline, images, "--cache-dir", root + "/cache", "--output", root + "/o2"], environment: broken)
    #expect(cached.status == 1, "\(cached.stderr)")
    #expect(
      cached.stderr.split(separator: "\n").filter { $0.contains("libvips.so.42 could not be loaded") }.count == 3,
      "\(cached.stderr)")
    let version = try await Runner.capture(executable: Runner.executable, arguments: ["--version"], environment: broken)
    #expect(version.status == 0 && version.stdout.contains("libvips unavailable"), "\(version.stdout)")
  }

  /// A fetch-only pipeline (no pixels): the runner saves the bytes as they came.
  func fetchOnly(_ root: String) throws -> String {
    let pipeline = root + "/fetch.json"
    try Data(
      #"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 0}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    return pipeline
  }

  @Test("an HTTP input opens libcurl; a fetch-only pipeline never opens libvips")
  func httpOpensCurl() async throws {
    let (root, _, _) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let jpeg = try TestImages.encoded(.jpeg(quality: 80), width: 32, height: 24).data
    let server = try await TestHTTPServer.start(routes: ["/a.jpg": .ok(body: Array(jpeg), contentType: "image/jpeg")])
    defer { Task { try? await server.shutdown() } }
    let result = try await Runner.capture(
      executable: Runner.executable, arguments: ["run", try fetchOnly(root), server.url("/a.jpg"), "--output", root + "/out"],
      environment: ["LD_DEBUG": "files"])
    #expect(result.status == 0, "\(result.stderr.suffix(2000))")
    #expect(Self.loadsCurl(result) && !Self.loadsVips(result))
    #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/out/a.jpg")) == jpeg)
  }

  @Test("a libcurl that cannot be loaded fails each HTTP input with the reason")
  func brokenCurlIsAnError() async throws {
    let (root, _, _) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let broken = try brokenLibrary("libcurl.so.4", in: root)
    let result = try await Runner.capture(
      executable: Runner.executable,
      arguments: ["run", try fetchOnly(root), "http://127.0.0.1:9/a.jpg", "http://127.0.0.1:9/b.jpg", "--output", root + "/out"],
      environment: broken)
    #expect(result.status == 1, "\(result.stderr)")
    #expect(
      result.stderr.split(separator: "\n").filter { $0.contains("libcurl.so.4 could not be loaded") }.count == 2,
      "\(result.stderr)")
  }
}
