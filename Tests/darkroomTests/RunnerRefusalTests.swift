import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What the runner says when the file system refuses it something: a folder it may not read.
@Suite("Runner refusals", .serialized, .timeLimit(.minutes(3)))
struct RunnerRefusalTests {
  /// The command prefix that runs a program with file permissions holding for it: none when not
  /// root; as root, `setpriv` without the capabilities that override permissions (root reads a
  /// folder of mode 000 otherwise); nil when that cannot be done here.
  static let permissionsHold: [String]? = {
    if geteuid() != 0 { return [] }
    let setpriv = ["/usr/bin/setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    let check = try? Runner.capture(executable: setpriv[0], arguments: Array(setpriv.dropFirst()) + ["/bin/true"])
    return check?.status == 0 ? setpriv : nil
  }()

  @Test(
    "a folder that cannot be read (mode 000) fails as accessDenied saying so, counted; the other inputs run",
    .enabled(if: permissionsHold != nil, "as root, only with setpriv able to drop the permission override"))
  func unreadableFolder() throws {
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
    let run = try Runner.capture(executable: command[0], arguments: Array(command.dropFirst()) + arguments)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("failed: \(locked): accessDenied: cannot read the folder: Permission denied"), "\(run.stderr)")
    #expect(run.stderr.contains("failed: \(inner): accessDenied: cannot read the folder: Permission denied"), "\(run.stderr)")
    #expect(run.stderr.contains("done 1, failed 2"), "\(run.stderr)")
    #expect(!run.stderr.contains("hold no image files"), "\(run.stderr)")
    // Alone, it is still a failure that says why, not "no inputs".
    let alone = try Runner.capture(
      executable: command[0], arguments: Array(command.dropFirst()) + [locked, "--output", folder + "/out"])
    #expect(alone.status == 1 && alone.stderr.contains("Permission denied"), "\(alone.stderr)")
    #expect(alone.stderr.contains("error: no input can be run"), "\(alone.stderr)")
  }
}
