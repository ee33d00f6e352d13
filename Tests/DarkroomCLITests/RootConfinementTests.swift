import CFileShim
import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `--root` confinement: the file opened is the file checked, even while the tree changes.
@Suite("Files are read beneath their root")
struct RootConfinementTests {
  let folder: String

  init() throws {
    folder = try Runner.temporaryDirectory()
  }

  func write(_ text: String, to path: String) throws {
    try FileManager.default.createDirectory(
      atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
  }

  /// The bytes read, or the error code.
  func fetch(_ fetcher: Fetcher, _ path: String) async -> Result<String, PipelineError> {
    do {
      let source = path.hasPrefix("file://") ? ImageSource(path) : ImageSource(path: path)
      let fetched = try await StageHarness().run(fetcher, on: source)
      return .success(String(decoding: fetched.bytes.data, as: UTF8.self))
    } catch let error as PipelineError {
      return .failure(error)
    } catch {
      return .failure(PipelineError(.stageFailed, "\(error)"))
    }
  }

  /// Starts a thread that swaps the folder at `path` with the symlink at `path + ".link"` as fast
  /// as it can, atomically (`renameat2(RENAME_EXCHANGE)`: the path always exists, as a folder or
  /// as the link), until the returned function is called; that function waits for the thread and
  /// returns how many swaps it made. It returns once the first swap is made (or has failed). The
  /// thread runs at the lowest priority (nice 19): it races the reads whenever a core is free, but
  /// never starves the rest of a parallel test run.
  func startSwapping(_ path: String) -> @Sendable () -> Int {
    let stop = Protected(false)
    let swaps = Protected(0)
    let done = DispatchSemaphore(value: 0)
    let firstSwap = DispatchSemaphore(value: 0)
    let swapper = Thread {
      // On Linux, PRIO_PROCESS with 0 names the calling thread (the nice value is per thread).
      _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
      while !stop.value {
        guard dr_rename_exchange(AT_FDCWD, path, AT_FDCWD, path + ".link") == 0 else { break }
        swaps.withLock { $0 += 1 }
        if swaps.value == 1 { firstSwap.signal() }
      }
      if swaps.value == 0 { firstSwap.signal() }
      done.signal()
    }
    swapper.start()
    // On a busy machine a nice-19 thread may not run before the race is over: it starts racing
    // before the caller does.
    firstSwap.wait()
    return {
      stop.withLock { $0 = true }
      done.wait()
      return swaps.value
    }
  }

  /// Writes `photo.jpg` ("inside") in the folder `path` and ("OUTSIDE") in `outside`, links
  /// `path.link` to `outside`, and starts swapping the two.
  func startRace(swapping path: String, with outside: String) throws -> @Sendable () -> Int {
    try write("inside", to: path + "/photo.jpg")
    try write("OUTSIDE", to: outside + "/photo.jpg")
    try FileManager.default.createSymbolicLink(atPath: path + ".link", withDestinationPath: outside)
    return startSwapping(path)
  }

  @Test("a parent folder swapped for a symlink to outside during reads never yields the outside file")
  func parentSwapRace() async throws {
    let root = folder + "/root"
    // root/dir alternates between the real folder and a symlink to the outside folder.
    let stopSwapping = try startRace(swapping: root + "/dir", with: folder + "/outside")
    let fetcher = Fetcher(root: root)
    var inside = 0
    var refused: [PipelineError.Code: Int] = [:]
    var escapes: [String] = []
    for _ in 0..<500 {
      switch await fetch(fetcher, root + "/dir/photo.jpg") {
      case .success(let text):
        if text == "inside" { inside += 1 } else { escapes.append(text) }
      case .failure(let error):
        refused[error.code, default: 0] += 1
        #expect([.accessDenied, .notFound].contains(error.code), "\(error)")
      }
    }
    let swaps = stopSwapping()
    #expect(escapes.isEmpty, "\(escapes.count) of 500 reads returned the file outside the root")
    #expect(swaps > 0)
    print("root race: \(inside) inside, refused \(refused), \(swaps) swaps")
  }

  @Test("an inner root swapped for a symlink never widens the outer root")
  func innerRootSwapRace() async throws {
    let outer = folder + "/outer"
    let stopSwapping = try startRace(swapping: outer + "/inner", with: folder + "/elsewhere")
    let fetcher = Fetcher(roots: [outer, outer + "/inner"])
    var escapes = 0
    for _ in 0..<300 {
      if case .success(let text) = await fetch(fetcher, outer + "/inner/photo.jpg"), text != "inside" { escapes += 1 }
    }
    #expect(stopSwapping() > 0)
    #expect(escapes == 0)
  }

  @Test("inside the root: .., absolute and relative paths, in-root symlinks (relative and absolute) are read")
  func insideTheRoot() async throws {
    let root = folder + "/root"
    try write("a", to: root + "/a/photo.jpg")
    try write("b", to: root + "/b/other.jpg")
    try FileManager.default.createSymbolicLink(atPath: root + "/rel.jpg", withDestinationPath: "a/photo.jpg")
    try FileManager.default.createSymbolicLink(atPath: root + "/abs.jpg", withDestinationPath: root + "/b/other.jpg")
    try FileManager.default.createSymbolicLink(atPath: root + "/linkdir", withDestinationPath: "b")
    let fetcher = Fetcher(root: root)
    #expect(try await fetch(fetcher, root + "/a/../b/other.jpg").get() == "b")
    #expect(try await fetch(fetcher, root + "/rel.jpg").get() == "a")
    #expect(try await fetch(fetcher, root + "/abs.jpg").get() == "b")
    #expect(try await fetch(fetcher, root + "/linkdir/other.jpg").get() == "b")
    #expect(try await fetch(fetcher, "file://" + root + "/a/photo.jpg").get() == "a")
    // The root itself given through a symlink, and with a trailing slash.
    try FileManager.default.createSymbolicLink(atPath: folder + "/rootlink", withDestinationPath: root)
    #expect(try await fetch(Fetcher(root: folder + "/rootlink/"), root + "/a/photo.jpg").get() == "a")
    #expect(try await fetch(Fetcher(root: root), folder + "/rootlink/a/photo.jpg").get() == "a")
    // A relative path (from the working directory).
    let relative = String(root.dropFirst(FileManager.default.currentDirectoryPath.count + 1))
    if root.hasPrefix(FileManager.default.currentDirectoryPath + "/") {
      #expect(try await fetch(fetcher, relative + "/a/photo.jpg").get() == "a")
    }
    // Two nested roots, given in either order.
    #expect(try await fetch(Fetcher(roots: [root + "/a", root]), root + "/a/photo.jpg").get() == "a")
    #expect(try await fetch(Fetcher(roots: [root, root + "/a"]), root + "/a/photo.jpg").get() == "a")
    #expect(try await fetch(Fetcher(roots: ["/", root]), root + "/a/photo.jpg").get() == "a")
  }

  @Test("escapes, missing files and folders keep their typed errors and say what happened")
  func typedErrors() async throws {
    let root = folder + "/root"
    try write("a", to: root + "/a/photo.jpg")
    try write("x", to: folder + "/secret.jpg")
    try write("b", to: root + "/b/other.jpg")
    try FileManager.default.createSymbolicLink(atPath: root + "/out.jpg", withDestinationPath: folder + "/secret.jpg")
    try FileManager.default.createSymbolicLink(atPath: root + "/outdir", withDestinationPath: folder)
    let fetcher = Fetcher(root: root)
    func code(_ path: String) async -> PipelineError.Code? {
      if case .failure(let error) = await fetch(fetcher, path) { return error.code }
      return nil
    }
    #expect(await code(root + "/../secret.jpg") == .accessDenied)
    #expect(await code(root + "/out.jpg") == .accessDenied)
    #expect(await code(root + "/outdir/secret.jpg") == .accessDenied)
    #expect(await code(root + "/missing.jpg") == .notFound)
    #expect(await code(root + "/a") == .invalidInput)
    #expect(await code(root) == .accessDenied)
    // The narrower of two roots decides.
    #expect(await code(root + "/a/photo.jpg") == nil)
    if case .failure(let error) = await fetch(Fetcher(roots: [root, root + "/b"]), root + "/a/photo.jpg") {
      #expect(error.code == .accessDenied)
      #expect(error.message.contains("outside the allowed root"))
    } else {
      Issue.record("read outside the inner root")
    }
    if case .failure(let error) = await fetch(Fetcher(root: folder + "/nope"), root + "/a/photo.jpg") {
      #expect(error.code == .accessDenied)
      #expect(error.message.contains("does not exist"))
    } else {
      Issue.record("read under a missing root")
    }
  }

  @Test("outputs are written beneath the output directory: a subfolder swapped for a symlink never sends a write outside")
  func outputSubfolderRace() throws {
    let output = folder + "/output"
    let outside = folder + "/elsewhere"
    let stopSwapping = try startRace(swapping: output + "/thumbs", with: outside)
    var written = 0
    for index in 0..<300 {
      if (try? AtomicFile.write(ImageBytes(Data("new".utf8)), named: "thumbs/\(index).jpg", in: output)) != nil {
        written += 1
      }
    }
    #expect(stopSwapping() > 0)
    let leaked = try FileManager.default.contentsOfDirectory(atPath: outside).filter { $0 != "photo.jpg" }
    #expect(leaked.isEmpty, "written outside the output directory: \(leaked.prefix(5))")
    #expect(try String(contentsOfFile: outside + "/photo.jpg", encoding: .utf8) == "OUTSIDE")
    print("output race: \(written) of 300 written inside")
  }

  @Test("a symlinked subfolder of the output directory is refused; overwrite off refuses existing names")
  func outputSymlink() throws {
    let output = folder + "/output"
    try write("x", to: folder + "/elsewhere/keep.txt")
    try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: output + "/link", withDestinationPath: folder + "/elsewhere")
    #expect(throws: NSError.self) { try AtomicFile.write(ImageBytes(Data("a".utf8)), named: "link/a.jpg", in: output) }
    #expect(!FileManager.default.fileExists(atPath: folder + "/elsewhere/a.jpg"))
    try AtomicFile.write(ImageBytes(Data("a".utf8)), named: "new/deeper/a.jpg", in: output)
    #expect(try String(contentsOfFile: output + "/new/deeper/a.jpg", encoding: .utf8) == "a")
    #expect(throws: NSError.self) {
      try AtomicFile.write(ImageBytes(Data("b".utf8)), named: "new/deeper/a.jpg", in: output, overwrite: false)
    }
    #expect(throws: NSError.self) { try AtomicFile.write(ImageBytes(Data("c".utf8)), named: "../c.jpg", in: output) }
  }
}
