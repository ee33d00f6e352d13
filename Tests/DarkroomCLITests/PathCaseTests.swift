import Foundation
import Testing

/// Paths of the repository that differ only by case collide on a case-insensitive file system
/// (macOS's default APFS volumes, Windows): a clone there silently merges `Sources/darkroom` into
/// `Sources/Darkroom`. Every tracked file and every folder above one must keep a spelling of its own.
@Suite("Repository paths")
struct PathCaseTests {
  /// The spellings that collide once case is ignored, each group sorted, for every tracked path
  /// and every folder leading to one.
  static func caseCollisions(in paths: [String]) -> [[String]] {
    var spellings: [String: Set<String>] = [:]
    for path in paths {
      let components = path.split(separator: "/", omittingEmptySubsequences: true)
      for end in components.indices {
        let prefix = components[...end].joined(separator: "/")
        spellings[prefix.lowercased(), default: []].insert(prefix)
      }
    }
    return spellings.values.filter { $0.count > 1 }.map { $0.sorted() }.sorted { $0[0] < $1[0] }
  }

  static var isGitCheckout: Bool {
    FileManager.default.fileExists(atPath: Runner.package.appendingPathComponent(".git").path) && gitExecutable != nil
  }

  static var gitExecutable: String? {
    let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
    return folders.map { "\($0)/git" }.first { FileManager.default.isExecutableFile(atPath: $0) }
  }

  @Test("the check finds files and folders that differ only by case")
  func checkFindsCollisions() {
    let collisions = Self.caseCollisions(in: [
      "Sources/Darkroom/Darkroom.swift", "Sources/darkroom/main.swift", "Docs/README.md", "Docs/Readme.md",
      "Tests/DarkroomTests/A.swift", "Tests/DarkroomCLITests/A.swift",
    ])
    #expect(collisions == [["Docs/README.md", "Docs/Readme.md"], ["Sources/Darkroom", "Sources/darkroom"]])
  }

  @Test(
    "no two tracked paths differ only by case",
    .enabled(if: isGitCheckout, "needs a git checkout of the package and git on PATH to list the tracked files"))
  func trackedPathsDoNotCollide() async throws {
    let git = try #require(Self.gitExecutable)
    let listing = try await Runner.capture(executable: git, arguments: ["ls-files", "-z"])
    #expect(listing.status == 0, "\(listing.stderr)")
    let paths = listing.stdout.split(separator: "\0").map(String.init)
    #expect(paths.contains("Package.swift"))
    let collisions = Self.caseCollisions(in: paths)
    #expect(collisions.isEmpty, "paths that differ only by case: \(collisions)")
  }
}
