import Darkroom
import DarkroomVipsTesting
import Foundation
import Testing

/// libvips is opened (dlopen) when a stage first needs pixels, never before: a rerun whose images
/// all come from the disk cache, `validate` and `--help` never load its hundred libraries. The
/// dynamic loader says what it loads when `LD_DEBUG=files` is set (glibc).
@Suite("libvips opened on first use")
struct LazyLibraryTests {
  static let pipeline = """
    {"version": 1, "name": "lazy", "stages": [
      {"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 40},
      {"stage": "encode", "format": "jpeg"}, {"stage": "cache", "store": "disk", "directory": "lazy"},
      {"stage": "write", "template": "{name}.jpg"}]}
    """

  /// Whether the loader's trace (stderr under LD_DEBUG=files) shows libvips being loaded.
  static func loadsVips(_ result: Runner.Result) -> Bool {
    result.stderr.split(separator: "\n").contains { $0.contains("file=libvips.so") }
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
    for index in 0..<3 {
      let written = try Data(contentsOf: URL(fileURLWithPath: root + "/out2/img\(index).jpg"))
      let original = try Data(contentsOf: URL(fileURLWithPath: root + "/out1/img\(index).jpg"))
      #expect(written == original)
    }
    let validate = try await Runner.capture(executable: Runner.executable, arguments: ["validate", pipeline], environment: trace)
    #expect(validate.status == 0 && !Self.loadsVips(validate), "\(validate.stdout)")
    let help = try await Runner.capture(executable: Runner.executable, arguments: ["run", "--help"], environment: trace)
    #expect(help.status == 0 && !Self.loadsVips(help))
    let version = try await Runner.capture(executable: Runner.executable, arguments: ["--version"], environment: trace)
    #expect(version.status == 0 && Self.loadsVips(version) && version.stdout.contains("libvips 8."), "\(version.stdout)")
  }

  @Test("a libvips that cannot be loaded is a clear error, never a crash")
  func brokenLibraryIsAnError() async throws {
    let (root, images, pipeline) = try fixtures()
    defer { try? FileManager.default.removeItem(atPath: root) }
    // A file of that name first on the library path: dlopen finds it and refuses it.
    let fake = root + "/lib"
    try FileManager.default.createDirectory(atPath: fake, withIntermediateDirectories: true)
    try Data("not a library".utf8).write(to: URL(fileURLWithPath: fake + "/libvips.so.42"))
    let broken = ["LD_LIBRARY_PATH": fake]
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
}
