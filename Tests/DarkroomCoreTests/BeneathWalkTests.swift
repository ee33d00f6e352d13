import CFileShim
import Foundation
import Testing

@testable import DarkroomCore

#if canImport(Glibc)
  import Glibc
#endif

/// The two ways ``FileTransport`` opens a path beneath a folder: `openat2` and the `openat` walk
/// used where the kernel lacks it. Both must refuse the same things.
@Suite("Opening beneath a folder")
struct BeneathWalkTests {
  let folder = NSTemporaryDirectory() + "darkroom-beneath-\(UUID().uuidString)"

  init() throws {
    let manager = FileManager.default
    try manager.createDirectory(atPath: folder + "/root/a/b", withIntermediateDirectories: true)
    try manager.createDirectory(atPath: folder + "/outside", withIntermediateDirectories: true)
    try Data("inside".utf8).write(to: URL(fileURLWithPath: folder + "/root/a/b/f.txt"))
    try Data("OUTSIDE".utf8).write(to: URL(fileURLWithPath: folder + "/outside/f.txt"))
    try manager.createSymbolicLink(atPath: folder + "/root/out", withDestinationPath: folder + "/outside")
    try manager.createSymbolicLink(atPath: folder + "/root/inlink", withDestinationPath: "a/b")
    try manager.createSymbolicLink(atPath: folder + "/root/a/file.link", withDestinationPath: "b/f.txt")
  }

  typealias Opener = @Sendable (Int32, String, Int32) -> Int32
  static let openers: [(String, Opener)] = [
    ("openat2", { FileTransport.openBeneath($0, $1, flags: $2) }),
    ("walk", { FileTransport.walkBeneath($0, $1, flags: $2) }),
  ]

  enum Outcome: Equatable {
    case success(String)
    case failure(Int32)
  }

  /// The text of the file opened, or the errno.
  func open(_ path: String, with opener: Opener) -> Outcome {
    let root = Glibc.open(folder + "/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(root) }
    let descriptor = opener(root, path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return .failure(errno) }
    defer { close(descriptor) }
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(descriptor, &buffer, buffer.count)
    return .success(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))
  }

  @Test("both read paths inside and refuse symlinks, .. and missing files alike", arguments: [0, 1])
  func sameRules(_ index: Int) {
    let (name, opener) = Self.openers[index]
    #expect(open("a/b/f.txt", with: opener) == .success("inside"), "\(name)")
    #expect(open("./a//b/f.txt", with: opener) == .success("inside"), "\(name)")
    #expect(open("out/f.txt", with: opener) == .failure(ELOOP), "\(name)")
    #expect(open("inlink/f.txt", with: opener) == .failure(ELOOP), "\(name): in-root links are resolved before")
    #expect(open("a/file.link", with: opener) == .failure(ELOOP), "\(name)")
    #expect(open("a/b/missing.txt", with: opener) == .failure(ENOENT), "\(name)")
    #expect(open("a/b/f.txt/x", with: opener) == .failure(ENOTDIR), "\(name)")
    let escape = open("../outside/f.txt", with: opener)
    #expect(escape == .failure(EXDEV), "\(name)")
  }

  @Test("the walk never opens outside while a folder on the path is swapped for a symlink")
  func walkRace() {
    let path = folder + "/root/a"
    try? FileManager.default.createSymbolicLink(atPath: path + ".link", withDestinationPath: folder + "/outside")
    try? FileManager.default.createDirectory(atPath: folder + "/outside/b", withIntermediateDirectories: true)
    try? Data("OUTSIDE".utf8).write(to: URL(fileURLWithPath: folder + "/outside/b/f.txt"))
    let stop = ManagedFlag()
    let done = DispatchSemaphore(value: 0)
    Thread {
      while !stop.isSet, dr_rename_exchange(AT_FDCWD, path, AT_FDCWD, path + ".link") == 0 {}
      done.signal()
    }.start()
    var outside = 0
    var inside = 0
    for _ in 0..<500 {
      switch open("a/b/f.txt", with: { FileTransport.walkBeneath($0, $1, flags: $2) }) {
      case .success(let text): if text == "inside" { inside += 1 } else { outside += 1 }
      case .failure(let code): #expect([ELOOP, ENOENT, ENOTDIR].contains(code), "\(code)")
      }
    }
    stop.set()
    done.wait()
    #expect(outside == 0)
  }
}

/// A flag set once, read from another thread.
final class ManagedFlag: Sendable {
  private let value = Protected(false)
  var isSet: Bool { value.value }
  func set() { value.withLock { $0 = true } }
}
