import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What the runner says when the file system refuses it something: a folder it may not read, an
/// image table another process holds.
@Suite("Runner refusals", .serialized, .timeLimit(.minutes(3)))
struct RunnerRefusalTests {
  /// The command prefix that runs a program with file permissions holding for it: none when not
  /// root; as root, `setpriv` without the capabilities that override permissions (root reads a
  /// folder of mode 000 otherwise); nil when that cannot be done here.
  static let permissionsHold: [String]? = {
    if geteuid() != 0 { return [] }
    let setpriv = ["/usr/bin/setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    let check = try? Runner.captureBlocking(
      executable: setpriv[0], arguments: Array(setpriv.dropFirst()) + ["/bin/true"], environment: [:])
    return check?.status == 0 ? setpriv : nil
  }()

  @Test(
    "a folder that cannot be read (mode 000) fails as accessDenied saying so, counted; the other inputs run",
    .enabled(if: permissionsHold != nil, "as root, only with setpriv able to drop the permission override"))
  func unreadableFolder() async throws {
    let folder = try Runner.temporaryDirectory()
    let locked = folder + "/locked"
    let inner = folder + "/tree/inner"
    defer {
      chmod(locked, 0o755)
      chmod(inner, 0o755)
      try? FileManager.default.removeItem(atPath: folder)
    }
    let image = Runner.package.path + "/Examples/images/rings.png"
    for place in [locked, inner] {
      try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
      try FileManager.default.copyItem(atPath: image, toPath: place + "/hidden.png")
      #expect(chmod(place, 0) == 0)
    }
    try FileManager.default.copyItem(atPath: image, toPath: folder + "/tree/seen.png")
    let prefix = try #require(Self.permissionsHold)
    let command = prefix + [Runner.executable, "run", "Examples/pipelines/thumbnail.json"]
    let arguments = [locked, folder + "/tree", "--recursive", "--output", folder + "/out"]
    let run = try await Runner.capture(executable: command[0], arguments: Array(command.dropFirst()) + arguments)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("failed: \(locked): accessDenied: cannot read the folder: Permission denied"), "\(run.stderr)")
    #expect(run.stderr.contains("failed: \(inner): accessDenied: cannot read the folder: Permission denied"), "\(run.stderr)")
    #expect(run.stderr.contains("done 1, failed 2"), "\(run.stderr)")
    #expect(!run.stderr.contains("hold no image files"), "\(run.stderr)")
    // Alone, it is still a failure that says why, not "no inputs".
    let alone = try await Runner.capture(
      executable: command[0], arguments: Array(command.dropFirst()) + [locked, "--output", folder + "/out"])
    #expect(alone.status == 1 && alone.stderr.contains("Permission denied"), "\(alone.stderr)")
    #expect(alone.stderr.contains("error: no input can be run"), "\(alone.stderr)")
  }

  @Test("an image table locked by another process: exit 75 saying so, not an invalid pipeline; the run after it works")
  func lockedImageTable() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/tabled.json"
    try Data(
      #"""
      {"version": 1, "name": "tabled", "stages": [{"stage": "fetch"}, {"stage": "decode"},
        {"stage": "resize", "width": 40, "height": 40, "mode": "fill"},
        {"stage": "cache", "store": "table", "width": 40, "height": 40, "maxCount": 8}, {"stage": "encode", "format": "png"}]}
      """#.utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let run = ["run", pipeline, "Examples/images/rings.png", "--output", folder + "/out", "--cache-dir", folder + "/cache"]
    let first = try await Runner.run(run)
    #expect(first.status == 0, "\(first.stderr)")
    let tables = try FileManager.default.subpathsOfDirectory(atPath: folder + "/cache").filter { $0.hasSuffix(".imagetable") }
    let table = folder + "/cache/" + (try #require(tables.first))
    // This test process holds the table, as another run would.
    let holder = open(table, O_RDWR | O_CLOEXEC)
    try #require(holder >= 0)
    defer { close(holder) }
    #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)
    for arguments in [run, ["cache", "stats", pipeline, "--cache-dir", folder + "/cache"]] {
      let locked = try await Runner.run(arguments)
      #expect(locked.status == 75, "\(arguments[0]): \(locked.stderr)")
      #expect(locked.stderr.contains("is locked by another process"), "\(locked.stderr)")
      #expect(!locked.stderr.contains("invalid pipeline"), "\(locked.stderr)")
    }
    flock(holder, LOCK_UN)
    let after = try await Runner.run(run)
    #expect(after.status == 0, "\(after.stderr)")
  }
}
